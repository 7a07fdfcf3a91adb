//go:build tools

// Package tools pins kube-apiserver for hack/build-control-plane.sh.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
