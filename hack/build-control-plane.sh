#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module
# proxy into bin/ (never downloads a release binary). A build is skipped when
# bin/ already holds the binary built from the same tools go.mod/go.sum, so
# the ~4 minute kube-apiserver build happens once per machine, never inside a
# test. kube-controller-manager comes from the same k8s.io/kubernetes module
# and shares most of its packages with kube-apiserver, so it reuses the build
# cache the kube-apiserver build fills.
#
# Usage: hack/build-control-plane.sh [NAME...]   (default: all three)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
mkdir -p "${bin}"

# wanted NAME [ARG...]: NAME was asked for (no ARG asks for everything).
wanted() {
  local name="$1" arg
  shift
  (($# == 0)) && return 0
  for arg in "$@"; do [[ "${arg}" == "${name}" ]] && return 0; done
  return 1
}

build() {
  local name="$1" pkg="$2" moddir="$3" ldflags="$4"
  local stamp_file="${bin}/.${name}.stamp"
  local stamp
  stamp="$(cat "${moddir}/go.mod" "${moddir}/go.sum" | sha256sum | cut -d' ' -f1)-$(go env GOVERSION)"
  if [[ -x "${bin}/${name}" && -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${stamp}" ]]; then
    echo "${name}: up to date in ${bin}"
    return
  fi
  echo "${name}: building ${pkg} (this takes a few minutes once per machine)"
  local start=${SECONDS}
  (cd "${moddir}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "${ldflags}" -o "${bin}/${name}.tmp" "${pkg}")
  mv "${bin}/${name}.tmp" "${bin}/${name}"
  echo "${stamp}" > "${stamp_file}"
  echo "${name}: built in $((SECONDS - start))s"
}

k8s_version="$(cd "${root}/e2e/tools/kube-apiserver" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(cd "${root}/e2e/tools/etcd" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"

k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${k8s_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"

for name in etcd kube-apiserver kube-controller-manager; do
  wanted "${name}" "$@" || continue
  case "${name}" in
    etcd) build etcd go.etcd.io/etcd/server/v3 "${root}/e2e/tools/etcd" "-s -w" ;;
    kube-apiserver) build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${root}/e2e/tools/kube-apiserver" "${k8s_ldflags}" ;;
    kube-controller-manager) build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "${root}/e2e/tools/kube-apiserver" "${k8s_ldflags}" ;;
  esac
done
echo "control plane: kube-apiserver ${k8s_version}, etcd ${etcd_version}"
