package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// runningServer is the real webhook server (NewServer, `serve`'s TLS policy,
// limits and drain) serving a handler on 127.0.0.1 over TLS, as `serve`
// registers the guard's Handler.
type runningServer struct {
	URL    string
	Client *http.Client
	// Stop cancels the server's context and waits until Start returned.
	Stop func() error
}

func startServer(t testing.TB, h http.Handler) *runningServer {
	t.Helper()
	dir := t.TempDir()
	pool := writeServingCert(t, dir)
	port := freePort(t)
	srv := NewServer(ServerOptions{Host: "127.0.0.1", Port: port, CertDir: dir, TLSOpts: []func(*tls.Config){serveTLS}})
	srv.Register(Path, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(ShutdownTimeout + 5*time.Second):
			return errors.New("the server did not stop")
		}
	}
	t.Cleanup(func() { _ = stop() })
	deadline := time.Now().Add(10 * time.Second)
	for srv.StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the webhook server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
	t.Cleanup(client.CloseIdleConnections)
	return &runningServer{URL: "https://127.0.0.1:" + itoa(port) + Path, Client: client, Stop: stop}
}

// serveTLS is what `serve`'s Options.TLSConfig (cmd/webhook-guard/serve, whose
// Test_Options_TLSConfig holds it) applies with the default flags. It is
// restated here because webhook cannot import the command that imports it.
func serveTLS(cfg *tls.Config) {
	cfg.MinVersion = tls.VersionTLS12
	cfg.CipherSuites = nil
	cfg.NextProtos = []string{"h2", "http/1.1"}
}

func itoa(i int) string { return big.NewInt(int64(i)).String() }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// writeServingCert writes tls.crt/tls.key (and ca.crt) for 127.0.0.1 signed
// by a new CA into dir and returns a pool trusting the CA.
func writeServingCert(t testing.TB, dir string) *x509.CertPool {
	t.Helper()
	ca := newTestCA(t, "test-ca")
	leaf, err := ca.Issue("webhook-guard", "127.0.0.1")
	if err == nil {
		err = testpki.WriteSecretFiles(dir, ca.CA, leaf)
	}
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}
