package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// NewStandaloneGuard prepares (does not start) a guard without a control
// plane: its kubeconfig points at a closed port, so it suits configurations
// whose CA sources need no API reads (inline pem). It returns the CA that
// signed the serving certificate (for clients' RootCAs).
func NewStandaloneGuard(t testing.TB, cfg *guardapi.GuardConfig) (*Guard, *CA) {
	t.Helper()
	dir := t.TempDir()
	ca := NewCA(t, "webhook-guard-ca")
	certDir := filepath.Join(dir, "certs")
	WriteSecretDir(t, certDir, SecretData(ca, ca.Issue(t, "webhook-guard")))
	configPath := filepath.Join(dir, "guard.yaml")
	WriteFileAtomic(t, configPath, MarshalConfig(t, cfg))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	unreachable := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:%d"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
`, FreePort(t))
	if err := os.WriteFile(kubeconfig, []byte(unreachable), 0o600); err != nil {
		t.Fatal(err)
	}
	return &Guard{
		Bin:         GuardBinary(t),
		ConfigPath:  configPath,
		CertDir:     certDir,
		Kubeconfig:  kubeconfig,
		Port:        FreePort(t),
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		HealthAddr:  fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		Log:         &Buffer{},
		// The observer watches the API server, which a standalone guard
		// does not have: with it on, shutdown waits ~9 s for its watch to
		// give up on the closed port.
		ExtraArgs: []string{"--observe=false"},
	}, ca
}

// Signal sends sig to the running guard.
func (g *Guard) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	cmd, _ := g.proc.current()
	if cmd == nil {
		t.Fatal("guard not running")
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal the guard: %v", err)
	}
}

// WaitExit waits up to timeout for the process to exit and returns its exit
// code, or -1 and false when it is still running.
func (g *Guard) WaitExit(timeout time.Duration) (int, bool) {
	cmd, done := g.proc.current()
	if cmd == nil {
		return -1, false
	}
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return -1, false
	}
}

// Kill stops the guard with SIGKILL (a crashed replica) and waits for it.
func (g *Guard) Kill(t testing.TB) {
	t.Helper()
	cmd, done := g.proc.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}
