//go:build tools

// Package tools pins golang.org/x/vulndb: its data/osv holds the Go
// vulnerability database's OSV entries, and cmd/indexdb turns them into the
// database govulncheck reads with -db file://. hack/vulndb.sh builds it, so
// govulncheck runs where vuln.go.dev is not reachable (only the Go module
// proxy is).
package tools

import (
	_ "golang.org/x/vulndb/cmd/indexdb"
)
