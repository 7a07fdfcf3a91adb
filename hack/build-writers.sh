#!/usr/bin/env bash
# Builds the real writers that live in modules of their own under
# e2e/writers (each e2e/writers/<name> with a go.mod, so that the writer's
# dependency graph never reaches e2e/go.mod) into bin/<name>-writer. A build is skipped when bin/ already
# holds the binary built from the same go.mod, go.sum, sources and Go
# version, so the several-minute Kyverno build happens once per machine,
# never inside a test; a test without the binary fails and says to run
# `make tools`. (The writers in the e2e module itself, cainjector and
# rotator, are built by the tests.)
#
# Usage: hack/build-writers.sh [NAME...]   (default: every such module)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${root}/bin"
mkdir -p "${bin}"

build() {
  local name="$1" moddir="${root}/e2e/writers/$1"
  local out="${bin}/${name}-writer" stamp_file="${bin}/.${name}-writer.stamp"
  local stamp
  stamp="$(cat "${moddir}/go.mod" "${moddir}/go.sum" "${moddir}"/*.go | sha256sum | cut -d' ' -f1)-$(go env GOVERSION)"
  if [[ -x "${out}" && -f "${stamp_file}" && "$(cat "${stamp_file}")" == "${stamp}" ]]; then
    echo "${name}-writer: up to date in ${bin}"
    return
  fi
  echo "${name}-writer: building e2e/writers/${name} (several minutes once per machine)"
  local start=${SECONDS}
  # Its own go.mod, not go.work (the Makefile sets GOWORK=off as well).
  (cd "${moddir}" && GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "${out}.tmp" .)
  mv "${out}.tmp" "${out}"
  echo "${stamp}" > "${stamp_file}"
  echo "${name}-writer: built in $((SECONDS - start))s"
}

names=("$@")
if ((${#names[@]} == 0)); then
  for mod in "${root}"/e2e/writers/*/go.mod; do
    names+=("$(basename "$(dirname "${mod}")")")
  done
fi
for name in "${names[@]}"; do
  build "${name}"
done
