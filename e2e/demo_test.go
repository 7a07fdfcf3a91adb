package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
)

// TestDemoRunsToDone runs `make demo`'s program, as a new user's first
// command does, with the guard this suite built. The demo starts its own etcd
// and kube-apiserver and fails on the first step that does not do what it
// narrates, so a passing run means every step happened on a real API server.
// (The demo once broke for a whole session because no test ran it.)
func TestDemoRunsToDone(t *testing.T) {
	t.Parallel()
	framework.RequireControlPlane(t)
	demo := filepath.Join(t.TempDir(), "demo")
	build := exec.Command("go", "build", "-o", demo, "./hack/demo")
	build.Dir = framework.RepoRoot()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./hack/demo:\n%s", out)

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, demo)
	cmd.Dir = framework.RepoRoot()
	cmd.Env = append(os.Environ(), "WEBHOOK_GUARD_BINARY="+framework.GuardBinary(t))
	// On timeout, interrupt it as Ctrl-C would, so it stops what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	out, err = cmd.CombinedOutput()
	text := string(out)
	require.NoError(t, err, "the demo failed:\n%s", text)

	assert.Contains(t, text, "Done.")
	assert.Contains(t, text, "ca-mismatch", "the intruder's and the owner's foreign CA are denied")
	assert.Contains(t, text, "legacy-validating-webhook-configuration", "review lists the audit mapping's configuration")
	assert.Contains(t, text, "cleaned up: stopped the guard, kube-apiserver and etcd")
}
