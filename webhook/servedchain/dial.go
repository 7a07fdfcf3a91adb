package servedchain

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// DefaultTimeout bounds a dial and its handshake.
const DefaultTimeout = 5 * time.Second

// MinVersion is kube-apiserver's TLS floor as a client (client-go's
// transport): a server that offers nothing newer fails its calls.
const MinVersion = tls.VersionTLS12

// Dialer reads the chain an address serves. The zero value of a bound
// takes its default.
type Dialer struct {
	// Timeout bounds the dial and the handshake together.
	Timeout time.Duration
	// MaxCerts and MaxBytes bound the chain kept (certificates, bytes of
	// DER).
	MaxCerts, MaxBytes int
}

// Dial connects to addr and completes a TLS handshake offering serverName
// (SNI, as kube-apiserver sends it) at kube-apiserver's TLS floor, without
// verifying: the chain is verified afterwards (Roots.Verify) so that a
// failure can be classified, and against as many caBundles as trust the
// address. Nothing is written after the handshake. cut is true when the
// server sent more than the bounds keep.
func (d Dialer) Dial(ctx context.Context, addr, serverName string) (chain Chain, cut bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, orDuration(d.Timeout, DefaultTimeout))
	defer cancel()
	maxCerts, maxBytes := orDefault(d.MaxCerts, DefaultMaxCerts), orDefault(d.MaxBytes, DefaultMaxChainSize)
	cfg := &tls.Config{
		ServerName: serverName,
		MinVersion: MinVersion,
		// Verified afterwards, against the caBundle, to name the reason.
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified in Roots.Verify
		VerifyConnection: func(cs tls.ConnectionState) error {
			raw := make([][]byte, len(cs.PeerCertificates))
			for i, c := range cs.PeerCertificates {
				raw[i] = c.Raw
			}
			chain, cut = Keep(raw, maxCerts, maxBytes)
			return nil
		},
	}
	td := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := td.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Chain{}, false, err
	}
	_ = conn.Close()
	if chain.Empty() {
		return Chain{}, false, errors.New("the endpoint served no certificate within the bounds")
	}
	return chain, cut, nil
}

// Check is the whole check of one address of an endpoint: the roots of
// caBundle (one that holds no certificate fails before any dial), a
// handshake with addr for the endpoint's server name, and the served
// chain's verification at now. The chain is what was served (empty when
// nothing was).
func (d Dialer) Check(ctx context.Context, e Endpoint, caBundle []byte, addr string, now time.Time) (Chain, Result) {
	name := e.ServerName()
	roots, err := RootsOf(caBundle)
	if err != nil {
		return Chain{}, Result{ServerName: name, Reason: ReasonNoCABundle, Err: err}
	}
	chain, _, err := d.Dial(ctx, addr, name)
	if err != nil {
		return Chain{}, Result{ServerName: name, SystemRoots: roots.System(), Reason: ReasonUnreachable, Err: err}
	}
	return chain, roots.Verify(chain, name, now)
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func orDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}
