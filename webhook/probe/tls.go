package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

// servedChain is what a handshake keeps of the certificates the endpoint
// served: at most maxCerts of them and maxBytes of DER, in the order
// served, parsed from copies of their DER (never from the handshake's
// buffer, which holds whatever else the server sent). A longer chain is
// cut, never kept whole.
type servedChain struct {
	certs []*x509.Certificate
	bytes int
}

// size is the DER the chain holds.
func (c *servedChain) size() int { return c.bytes }

// keep copies the served certificates within the bounds; cut is true when
// the server sent more than was kept (or a certificate that does not
// parse), so that what is kept is not the whole chain kube-apiserver sees.
func keep(raw [][]byte, maxCerts, maxBytes int) (c servedChain, cut bool) {
	for _, der := range raw {
		if len(c.certs) == maxCerts || c.bytes+len(der) > maxBytes {
			return c, true
		}
		cert, err := x509.ParseCertificate(bytes.Clone(der))
		if err != nil {
			return c, true
		}
		c.bytes += len(der)
		c.certs = append(c.certs, cert)
	}
	return c, false
}

// handshake dials addr and completes a TLS handshake offering serverName
// (SNI, as kube-apiserver sends it), without verifying: the chain is
// verified afterwards so that a failure can be classified. Nothing is
// written after the handshake. The deadline bounds the dial and the
// handshake together.
func handshake(ctx context.Context, addr, serverName string, timeout time.Duration, maxCerts, maxBytes int) (chain servedChain, cut bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg := &tls.Config{
		ServerName: serverName,
		MinVersion: tls.VersionTLS12,
		// Verified below, against the stored caBundle, to name the reason.
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified in verify
		VerifyConnection: func(cs tls.ConnectionState) error {
			raw := make([][]byte, len(cs.PeerCertificates))
			for i, c := range cs.PeerCertificates {
				raw[i] = c.Raw
			}
			chain, cut = keep(raw, maxCerts, maxBytes)
			return nil
		},
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return servedChain{}, false, err
	}
	_ = conn.Close()
	if len(chain.certs) == 0 {
		return servedChain{}, false, errors.New("the endpoint served no certificate within the bounds")
	}
	return chain, cut, nil
}

// verify checks the served chain as kube-apiserver's client does: the
// first certificate is the leaf, the rest intermediates, roots the stored
// caBundle (nil: the system roots), for serverName, at now.
func verify(chain servedChain, roots *x509.CertPool, serverName string, now time.Time) (Reason, error) {
	inter := x509.NewCertPool()
	for _, c := range chain.certs[1:] {
		inter.AddCert(c)
	}
	_, err := chain.certs[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		DNSName:       serverName,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err == nil {
		return ReasonNone, nil
	}
	return classify(err), err
}

// classify names a verification error's reason.
func classify(err error) Reason {
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return ReasonExpired
	case errors.As(err, &hostname):
		return ReasonNameMismatch
	}
	// x509.UnknownAuthorityError, and every other chain that does not
	// build to the caBundle (a wrong usage, a malformed intermediate).
	return ReasonUnknownAuthority
}

// rootsOf is the pool kube-apiserver builds from a caBundle: nil (the system
// roots) for an empty one, an error for one that holds no certificate.
func rootsOf(caBundle []byte) (*x509.CertPool, error) {
	if len(caBundle) == 0 {
		return nil, nil //nolint:nilnil // a nil pool is the system roots, as tls.Config reads it
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return nil, fmt.Errorf("the caBundle (%d bytes) holds no PEM certificate", len(caBundle))
	}
	return pool, nil
}
