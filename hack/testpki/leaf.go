package testpki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
)

// Leaf is a serving certificate and its key.
type Leaf struct {
	// Cert is the parsed certificate.
	Cert *x509.Certificate
	// CertPEM and KeyPEM are what cert-manager writes as tls.crt and
	// tls.key.
	CertPEM, KeyPEM []byte
}

// Issue signs a serving certificate named cn for hosts: an IP SAN for each
// host that parses as an IP address, a DNS SAN for the others. With no hosts
// it is for localhost and 127.0.0.1, a server on this machine; a leaf with
// no SANs would serve nothing, since TLS clients ignore the CommonName. The
// leaf has the CA's key type and validity.
func (ca *CA) Issue(cn string, hosts ...string) (*Leaf, error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1"}
	}
	tmpl := ca.leafTemplate(cn, x509.ExtKeyUsageServerAuth)
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue("leaf", tmpl)
}

// leafTemplate is a certificate named cn for usage, with the CA's validity.
func (ca *CA) leafTemplate(cn string, usage x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   ca.Cert.NotBefore,
		NotAfter:    ca.Cert.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
}

// issue signs tmpl for a new key of the CA's key type; what names the
// certificate in errors ("leaf", "client").
func (ca *CA) issue(what string, tmpl *x509.Certificate) (*Leaf, error) {
	cn := tmpl.Subject.CommonName
	key, keyPEM, err := newKey(ca.keyType)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, cn, err)
	}
	cert, certPEM, err := sign(tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign %s %q: %w", what, cn, err)
	}
	return &Leaf{Cert: cert, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}
