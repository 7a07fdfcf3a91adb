#!/usr/bin/env bash
# git commit-msg hook: checks the message against CONTRIBUTING.md's
# convention. Install: ln -s ../../hack/commitmsg/hook.sh .git/hooks/commit-msg
set -euo pipefail
root="$(git rev-parse --show-toplevel)"
exec go -C "${root}" run ./hack/commitmsg "$(realpath "$1")"
