package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// clientAuthServer runs the real webhook server with ClientCAFile set,
// counting the requests that reach the handler.
type clientAuthServer struct {
	url     string
	pool    *x509.CertPool
	caFile  string
	reached *atomic.Int64
}

func startClientAuthServer(t *testing.T, clientCA *testpki.CA) *clientAuthServer {
	t.Helper()
	dir := t.TempDir()
	pool := writeServingCert(t, dir)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	require.NoError(t, os.WriteFile(caFile, clientCA.PEM, 0o600))
	reached := &atomic.Int64{}
	port := freePort(t)
	srv := NewServer(ServerOptions{Host: "127.0.0.1", Port: port, CertDir: dir, TLSOpts: []func(*tls.Config){serveTLS}, ClientCAFile: caFile})
	srv.Register(Path, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, "reviewed")
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for srv.StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the webhook server did not start (its readiness probe presents no client certificate)")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &clientAuthServer{url: "https://127.0.0.1:" + itoa(port) + Path, pool: pool, caFile: caFile, reached: reached}
}

// post sends one request on a new connection, presenting leaf if not nil.
func (s *clientAuthServer) post(t *testing.T, leaf *testpki.Leaf) (int, string, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: s.pool, MinVersion: tls.VersionTLS12}
	if leaf != nil {
		cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		require.NoError(t, err)
		// Presented whatever CAs the server names (Go's client would
		// otherwise send none that does not chain to them).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url, strings.NewReader("{}"))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func newPKI(t *testing.T, cn string) *testpki.CA {
	t.Helper()
	ca, err := testpki.NewCA(cn)
	require.NoError(t, err)
	return ca
}

func issueClient(t *testing.T, ca *testpki.CA) *testpki.Leaf {
	t.Helper()
	leaf, err := ca.IssueClient("kube-apiserver")
	require.NoError(t, err)
	return leaf
}

// Test_Server_clientCA: with ClientCAFile only a caller presenting a client
// certificate of that CA reaches the handler; one without a certificate gets
// a 401 saying what is required, one with another CA's certificate fails the
// handshake; a rewritten file takes effect for the next connection.
func Test_Server_clientCA(t *testing.T) {
	clientCA := newPKI(t, "client-ca")
	s := startClientAuthServer(t, clientCA)

	t.Run("if the caller presents no client certificate, answer 401 and never reach the handler", func(t *testing.T) {
		before := s.reached.Load()
		code, body, err := s.post(t, nil)
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, code)
		assert.Equal(t, errNoClientCert.Error()+"\n", body)
		assert.Equal(t, before, s.reached.Load())
	})
	t.Run("if the caller presents a certificate of another CA, fail the handshake", func(t *testing.T) {
		before := s.reached.Load()
		_, _, err := s.post(t, issueClient(t, newPKI(t, "stranger-ca")))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tls: ")
		assert.Equal(t, before, s.reached.Load())
	})
	t.Run("if the caller presents a certificate of the client CA, reach the handler", func(t *testing.T) {
		code, body, err := s.post(t, issueClient(t, clientCA))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "reviewed", body)
	})
	next := newPKI(t, "client-ca-2")
	t.Run("if the client CA file is rewritten, the next connection is verified against the new CA", func(t *testing.T) {
		require.NoError(t, os.WriteFile(s.caFile, next.PEM, 0o600))
		code, _, err := s.post(t, issueClient(t, next))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
		_, _, err = s.post(t, issueClient(t, clientCA))
		require.Error(t, err, "the replaced CA's certificates must fail")
	})
	t.Run("if the client CA file stops parsing, the last good CA stays", func(t *testing.T) {
		require.NoError(t, os.WriteFile(s.caFile, []byte("garbage"), 0o600))
		code, _, err := s.post(t, issueClient(t, next))
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
	})
}

// Test_Server_clientCA_badFile: a guard asked to authenticate its callers
// does not start with a client CA file it cannot use.
func Test_Server_clientCA_badFile(t *testing.T) {
	dir := t.TempDir()
	writeServingCert(t, dir)
	for name, data := range map[string][]byte{"missing": nil, "garbage": []byte("not PEM")} {
		t.Run(name, func(t *testing.T) {
			caFile := filepath.Join(t.TempDir(), "client-ca.crt")
			if data != nil {
				require.NoError(t, os.WriteFile(caFile, data, 0o600))
			}
			srv := NewServer(ServerOptions{Host: "127.0.0.1", Port: freePort(t), CertDir: dir, TLSOpts: []func(*tls.Config){serveTLS}, ClientCAFile: caFile})
			err := srv.Start(t.Context())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "client CA file")
			assert.False(t, errors.Is(err, context.Canceled))
		})
	}
}
