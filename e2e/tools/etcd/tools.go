//go:build tools

// Package tools pins the etcd server for hack/build-control-plane.sh.
package tools

import _ "go.etcd.io/etcd/server/v3"
