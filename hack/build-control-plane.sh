#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into bin/ (never
# downloads a release binary). A build is skipped when bin/ already holds the
# binary built from the same tools go.mod/go.sum, so the ~4 minute
# kube-apiserver build happens once per machine, never inside a test.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
mkdir -p "${bin}"

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

build etcd go.etcd.io/etcd/server/v3 "${root}/e2e/tools/etcd" "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${root}/e2e/tools/kube-apiserver" \
  "-s -w -X k8s.io/component-base/version.gitVersion=${k8s_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
echo "control plane: kube-apiserver ${k8s_version}, etcd ${etcd_version}"
