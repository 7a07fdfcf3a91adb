package testpki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
)

// IssueClient signs a client certificate named cn (ExtKeyUsage clientAuth,
// which a TLS server requires of the certificates its clients present), as
// kube-apiserver presents one to a webhook that authenticates it.
func (ca *CA) IssueClient(cn string) (*Leaf, error) {
	key, keyPEM, err := newKey(ca.keyType)
	if err != nil {
		return nil, fmt.Errorf("client %q: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   ca.Cert.NotBefore,
		NotAfter:    ca.Cert.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	cert, certPEM, err := sign(tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign client %q: %w", cn, err)
	}
	return &Leaf{Cert: cert, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}
