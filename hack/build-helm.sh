#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy (helm.sh/helm/v3/cmd/helm, pinned
# in e2e/tools/helm/go.mod) into bin/helm; never downloads a helm release. The
# build is skipped when bin/helm was built from the same go.mod/go.sum and Go
# version, so it runs once per machine and never inside a test.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
moddir="${root}/e2e/tools/helm"
mkdir -p "${bin}"

stamp_file="${bin}/.helm.stamp"
stamp="$(cat "${moddir}/go.mod" "${moddir}/go.sum" | sha256sum | cut -d' ' -f1)-$(go env GOVERSION)"
if [[ -x "${bin}/helm" && -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${stamp}" ]]; then
  echo "helm: up to date in ${bin}"
  exit 0
fi

helm_version="$(cd "${moddir}" && go list -m -f '{{.Version}}' helm.sh/helm/v3)"
# Like helm's own Makefile: the default Kubernetes version helm assumes for
# `helm template`/`helm lint` (.Capabilities.KubeVersion) follows the client-go
# it is built with (client-go v0.X.Y -> Kubernetes 1.X).
client_go="$(cd "${moddir}" && go list -m -f '{{.Version}}' k8s.io/client-go)"
k8s_minor="$(echo "${client_go}" | cut -d. -f2)"

ldflags="-s -w"
ldflags+=" -X helm.sh/helm/v3/internal/version.version=${helm_version}"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1"
ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${k8s_minor}"
ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1"
ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${k8s_minor}"

echo "helm: building helm.sh/helm/v3/cmd/helm ${helm_version} (about a minute once per machine)"
start=${SECONDS}
(cd "${moddir}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "${ldflags}" -o "${bin}/helm.tmp" helm.sh/helm/v3/cmd/helm)
mv "${bin}/helm.tmp" "${bin}/helm"
echo "${stamp}" > "${stamp_file}"
echo "helm: built ${helm_version} in $((SECONDS - start))s"
