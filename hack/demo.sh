#!/usr/bin/env bash
# make demo: run the narrated walkthrough (hack/demo) against a real local
# kube-apiserver; it stops everything it started on exit and on Ctrl-C.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./hack/demo
