//go:build tools

// Package tools pins the linters for hack/build-lint.sh.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "golang.org/x/vuln/cmd/govulncheck"
)
