package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// clientCAs is the CA pool client certificates must chain to, read from a
// file and re-read when its bytes change, so that a rotation of the client
// CA (a mounted Secret) needs no restart. A file that stops parsing keeps
// the last good pool: a half-written file must not open the endpoint nor
// close it.
type clientCAs struct {
	path string

	mu   sync.Mutex
	data []byte
	pool *x509.CertPool
}

// newClientCAs reads path once; a missing or certificate-less file is an
// error, so that a guard never starts believing it authenticates callers.
func newClientCAs(path string) (*clientCAs, error) {
	c := &clientCAs{path: path}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload re-reads the file if its bytes changed.
func (c *clientCAs) reload() error {
	data, err := os.ReadFile(c.path)
	if err != nil {
		return fmt.Errorf("client CA file: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pool != nil && bytes.Equal(data, c.data) {
		return nil
	}
	if _, err := cabundle.Parse(data); err != nil {
		return fmt.Errorf("client CA file %s: the data %w", c.path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("client CA file %s: holds no PEM certificate", c.path)
	}
	c.data, c.pool = data, pool
	return nil
}

// current is the pool to verify a new connection's client certificate with.
func (c *clientCAs) current() *x509.CertPool {
	_ = c.reload() // on error the last good pool stays
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pool
}

// configForClient verifies a presented client certificate against the
// current pool. A connection without one is accepted at the TLS layer
// (the readiness probe dials without a certificate) and refused by
// requireClientCert for every request.
func (c *clientCAs) configForClient(base *tls.Config) func(*tls.ClientHelloInfo) (*tls.Config, error) {
	return func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		cfg.ClientCAs = c.current()
		return cfg, nil
	}
}

// errNoClientCert is the answer to a request without a verified client
// certificate.
var errNoClientCert = errors.New("a client certificate signed by the guard's --client-ca-file is required: " +
	"kube-apiserver presents the one its AdmissionConfiguration's kubeConfigFile names")

// requireClientCert refuses (401) every request whose connection presented
// no client certificate that chains to the client CA: only kube-apiserver
// may submit AdmissionReviews, which become records, Events and metrics.
func requireClientCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, errNoClientCert.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
