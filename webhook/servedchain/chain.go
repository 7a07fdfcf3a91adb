package servedchain

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Bounds of a served chain, whoever sends it.
const (
	// DefaultMaxCerts is how many served certificates a chain keeps.
	DefaultMaxCerts = 8
	// DefaultMaxChainSize is how many bytes of DER a chain keeps.
	DefaultMaxChainSize = 64 << 10
)

// Chain is what was kept of the certificates an endpoint served: the leaf
// first, then the intermediates, in the order served, parsed from copies of
// their DER (never from a handshake's buffer, which holds whatever else the
// server sent).
type Chain struct {
	certs []*x509.Certificate
	bytes int
}

// Certs are the chain's certificates, leaf first; do not modify them.
func (c Chain) Certs() []*x509.Certificate { return c.certs }

// Size is the DER the chain holds.
func (c Chain) Size() int { return c.bytes }

// Empty reports whether the chain holds no certificate.
func (c Chain) Empty() bool { return len(c.certs) == 0 }

// NewChain is a chain of certificates already parsed (read from a Secret,
// say), leaf first.
func NewChain(certs []*x509.Certificate) Chain {
	c := Chain{certs: certs}
	for _, cert := range certs {
		c.bytes += len(cert.Raw)
	}
	return c
}

// Keep copies the served certificates within maxCerts and maxBytes; cut is
// true when the server sent more than was kept (or a certificate that does
// not parse), so that what is kept is not the whole chain kube-apiserver
// sees. A longer chain is cut, never kept whole.
func Keep(raw [][]byte, maxCerts, maxBytes int) (c Chain, cut bool) {
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

// ParsePEM reads a chain from PEM (leaf first), as `openssl s_client
// -showcerts` prints it or a Secret's tls.crt holds it, within the default
// bounds: a chain a handshake would have cut is an error, as is PEM with no
// CERTIFICATE block or one that does not parse.
func ParsePEM(pemChain []byte) (Chain, error) {
	var raw [][]byte
	for rest := pemChain; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			raw = append(raw, block.Bytes)
		}
	}
	if len(raw) == 0 {
		return Chain{}, errors.New("holds no PEM CERTIFICATE block")
	}
	for i, der := range raw {
		if _, err := x509.ParseCertificate(der); err != nil {
			return Chain{}, fmt.Errorf("certificate %d of %d does not parse: %w", i+1, len(raw), err)
		}
	}
	chain, cut := Keep(raw, DefaultMaxCerts, DefaultMaxChainSize)
	if cut {
		return Chain{}, fmt.Errorf("%d certificates, over the prober's bounds (%d certificates, %d bytes of DER)", len(raw), DefaultMaxCerts, DefaultMaxChainSize)
	}
	return chain, nil
}
