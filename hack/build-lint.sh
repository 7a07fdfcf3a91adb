#!/usr/bin/env bash
# Builds golangci-lint and govulncheck from the Go module proxy (pinned in
# e2e/tools/lint/go.mod) into bin/, skipping the build when bin/ already holds
# binaries built from the same go.mod/go.sum and Go version.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
moddir="${root}/e2e/tools/lint"
mkdir -p "${bin}"

stamp_file="${bin}/.lint.stamp"
stamp="$(cat "${moddir}/go.mod" "${moddir}/go.sum" | sha256sum | cut -d' ' -f1)-$(go env GOVERSION)"
if [[ -x "${bin}/golangci-lint" && -x "${bin}/govulncheck" && -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${stamp}" ]]; then
  echo "lint tools: up to date in ${bin}"
  exit 0
fi
echo "lint tools: building golangci-lint and govulncheck (a few minutes once per machine)"
start=${SECONDS}
(cd "${moddir}" && GOFLAGS=-mod=mod go build -trimpath -o "${bin}/golangci-lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
(cd "${moddir}" && GOFLAGS=-mod=mod go build -trimpath -o "${bin}/govulncheck" golang.org/x/vuln/cmd/govulncheck)
echo "${stamp}" > "${stamp_file}"
echo "lint tools: built in $((SECONDS - start))s"
