#!/usr/bin/env bash
# govulncheck without vuln.go.dev: this machine (and CI) reach only the Go
# module proxy, so the vulnerability database comes from the golang.org/x/vulndb
# module pinned in e2e/tools/vulndb/go.mod (its data/osv entries), indexed once
# by its own cmd/indexdb into VULNDB_DIR and passed as -db file://.
#
# The scan uses the toolchain go.mod declares (GOTOOLCHAIN=auto: the `toolchain`
# line, fetched once from the module proxy as golang.org/toolchain), the one
# `make build` ships with; the machine's go.env says GOTOOLCHAIN=local, and its
# older standard library has known vulnerabilities (see docs/reliability.md).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
moddir="${root}/e2e/tools/vulndb"
db="${VULNDB_DIR:-${root}/.cache/vulndb}"
stamp="$(cat "${moddir}/go.mod" "${moddir}/go.sum" | sha256sum | cut -d' ' -f1)"
if [[ ! -f "${db}/index/db.json" || "$(cat "${db}/.stamp" 2>/dev/null)" != "${stamp}" ]]; then
  echo "vulndb: indexing golang.org/x/vulndb into ${db}"
  # `go list -m` does not download: fetch the module first, so a fresh
  # module cache yields its directory rather than an empty string.
  (cd "${moddir}" && go mod download golang.org/x/vulndb)
  src="$(cd "${moddir}" && go list -m -f '{{.Dir}}' golang.org/x/vulndb)"
  if [[ -z "${src}" || ! -d "${src}/data/osv" ]]; then
    echo "vulndb: golang.org/x/vulndb has no data/osv in the module cache (${src:-not downloaded})" >&2
    exit 1
  fi
  rm -rf "${db}"
  (cd "${moddir}" && go run golang.org/x/vulndb/cmd/indexdb -vulns "${src}/data/osv" -out "${db}")
  echo "${stamp}" > "${db}/.stamp"
fi
echo "vulndb: $(cd "${moddir}" && go list -m -f '{{.Version}}' golang.org/x/vulndb) ($(ls "${db}/ID" | wc -l) entries)"
cd "${root}"
GOTOOLCHAIN=auto "${root}/bin/govulncheck" -db "file://${db}" ./...
