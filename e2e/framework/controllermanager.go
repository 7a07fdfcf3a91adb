package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ControllerManager is a kube-controller-manager (bin/kube-controller-manager,
// built by `make tools` from the same k8s.io/kubernetes module as
// kube-apiserver) running a few of its controllers against a test API
// server. envtest runs no controllers at all, so without it nothing acts on
// owner references or deleted namespaces.
type ControllerManager struct {
	// Log holds its stdout and stderr; it is printed when the test fails.
	Log *Buffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// gcReadyLine is what the garbage collector logs once its informers have
// synced (or the initial sync timed out) and its workers start: from then on
// a deleted owner's dependents are collected.
const gcReadyLine = "Proceeding to collect garbage"

// StartGarbageCollector runs kube-controller-manager with only the garbage
// collector controller, as a system:masters client of the API server that
// admin points at, and returns once the collector is collecting. It is
// stopped by t.Cleanup.
func StartGarbageCollector(t testing.TB, admin *rest.Config) *ControllerManager {
	t.Helper()
	return StartControllerManager(t, admin, "garbagecollector")
}

// StartControllerManager runs kube-controller-manager with exactly the named
// controllers (e.g. "garbagecollector", "namespace"), leader election off and
// no serving port. When the garbage collector is among them it waits until
// the collector is collecting (at most 60 s). It is stopped by t.Cleanup,
// and its log is printed if the test failed.
func StartControllerManager(t testing.TB, admin *rest.Config, controllers ...string) *ControllerManager {
	t.Helper()
	if len(controllers) == 0 {
		t.Fatal("framework.StartControllerManager: name at least one controller")
	}
	bin := filepath.Join(RepoRoot(), "bin", "kube-controller-manager")
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s is missing; run `make tools` (hack/build-control-plane.sh builds it from the same k8s.io/kubernetes module as kube-apiserver)", bin)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kube-controller-manager.kubeconfig")
	if err := writeKubeconfig(admin, kubeconfig); err != nil {
		t.Fatalf("kubeconfig for kube-controller-manager: %v", err)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		// No HTTPS endpoint: nothing scrapes it, and no port to collide
		// with parallel tests.
		"--secure-port=0",
		"--v=2",
	}
	cm := &ControllerManager{Log: &Buffer{}}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = cm.Log, cm.Log
	// Never leak it: it dies with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kube-controller-manager: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	cm.cmd, cm.done = cmd, done
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- kube-controller-manager log (last 40 lines) ---\n%s", cm.Log.Tail(40))
		}
		cm.Stop(t)
	})

	if !slices.Contains(controllers, "garbagecollector") {
		return cm
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(cm.Log.String(), gcReadyLine) {
		select {
		case <-done:
			t.Fatalf("kube-controller-manager exited before its garbage collector started (%v): %s\n--- log (last 40 lines) ---\n%s",
				cmd.ProcessState, strings.Join(args, " "), cm.Log.Tail(40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-controller-manager's garbage collector did not start within 60s (no %q in its log)\n--- log (last 40 lines) ---\n%s", gcReadyLine, cm.Log.Tail(40))
		}
	}
	return cm
}

// Stop terminates kube-controller-manager (SIGTERM, then SIGKILL after a
// pod's termination grace period). It is safe to call more than once.
func (cm *ControllerManager) Stop(t testing.TB) {
	t.Helper()
	cm.mu.Lock()
	cmd, done := cm.cmd, cm.done
	cm.cmd, cm.done = nil, nil
	cm.mu.Unlock()
	if cmd == nil {
		return
	}
	terminate(t, "kube-controller-manager", cmd, done)
}

// writeKubeconfig writes cfg (host, CA and client certificate, as envtest
// hands them out) as a kubeconfig file.
func writeKubeconfig(cfg *rest.Config, path string) error {
	if len(cfg.CertData) == 0 && cfg.BearerToken == "" {
		return fmt.Errorf("the rest.Config for %s carries neither a client certificate nor a token", cfg.Host)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}
