//go:build tools

// Package tools pins the control-plane binaries hack/build-control-plane.sh
// builds: kube-apiserver, and kube-controller-manager (the e2e suite runs
// only its garbage collector, to show that what owner references tie to a
// deleted object really disappears).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
