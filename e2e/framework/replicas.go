package framework

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// proxyGuardAPI routes the guard's kubeconfig through a TCPProxy to
// kube-apiserver (the serving certificate names 127.0.0.1, so TLS verifies
// through the proxy).
func (e *Env) proxyGuardAPI(t testing.TB) {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(e.Guard.Kubeconfig)
	if err != nil {
		t.Fatalf("read the guard's kubeconfig: %v", err)
	}
	for name, c := range kc.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatalf("kubeconfig cluster %s: %v", name, err)
		}
		if e.APIProxy == nil {
			e.APIProxy = NewTCPProxy(t, "127.0.0.1:0", u.Host)
		}
		u.Host = e.APIProxy.Addr
		c.Server = u.String()
	}
	if err := clientcmd.WriteToFile(*kc, e.Guard.Kubeconfig); err != nil {
		t.Fatalf("write the guard's kubeconfig: %v", err)
	}
}

// NewReplica prepares (does not start) another guard process like
// Env.Guard: the same binary, config file, certificate directory, identity
// and extra arguments, on its own ports.
func (e *Env) NewReplica(t testing.TB, extraArgs ...string) *Guard {
	t.Helper()
	g := e.Guard
	return &Guard{
		env:         e,
		Bin:         g.Bin,
		ConfigPath:  g.ConfigPath,
		CertDir:     g.CertDir,
		Kubeconfig:  g.Kubeconfig,
		Port:        FreePort(t),
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		HealthAddr:  fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		Log:         &Buffer{},
		ExtraArgs:   append(append([]string(nil), g.ExtraArgs...), extraArgs...),
	}
}

// Addr is the guard's webhook host:port.
func (g *Guard) Addr() string { return fmt.Sprintf("127.0.0.1:%d", g.Port) }

// WriteConfigFile replaces the config file with raw bytes (atomically), for
// tests that write an invalid file.
func (g *Guard) WriteConfigFile(t testing.TB, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(g.ConfigPath), ".raw-config.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, g.ConfigPath); err != nil {
		t.Fatal(err)
	}
}
