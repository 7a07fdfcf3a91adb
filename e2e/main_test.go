// Package e2e proves webhook-guard against a real kube-apiserver: every
// scenario drives the API server with clients acting as distinct users and
// service accounts and asserts what the API server did, with the guard reached
// only through the static webhook manifest `webhook-guard render` writes.
//
// The control plane is built once by `make tools` into bin/; the suite fails
// (never skips) when it is missing.
package e2e

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime; its progress is not test output.
	logf.SetLogger(logr.Discard())
	code := m.Run()
	framework.Cleanup()
	os.Exit(code)
}
