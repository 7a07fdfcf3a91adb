// Package testpki makes the certificates that tests, the e2e suite, the demo
// and the sample generator need: a self-signed CA and the serving
// certificates it issues, parsed and in PEM as cert-manager writes them into
// a Secret. Every call generates fresh keys; nothing is stored.
//
// It returns errors rather than taking a testing.TB so that commands (the
// demo, gensamples) can use it too; each test package keeps the one-line
// helper its tests call, which only names the certificate.
//
// It is for tests and development tools only: none of its choices is meant
// as a production default.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	// Cert is the parsed CA certificate; Cert.Raw is its DER.
	Cert *x509.Certificate
	// Key is the CA's private key.
	Key crypto.Signer
	// PEM is the CA certificate in PEM, as it goes into a caBundle or a
	// Secret's ca.crt.
	PEM []byte
	// KeyPEM is Key in PEM (SEC 1 or PKCS #1, as cert-manager writes
	// tls.key), also for tests that need a private key where a certificate
	// belongs.
	KeyPEM []byte

	keyType KeyType
}

// NewCA generates a self-signed CA named cn: ECDSA P-256 and valid for
// DefaultValidity unless an option says otherwise.
func NewCA(cn string, opts ...Option) (*CA, error) {
	now := time.Now()
	o := options{notBefore: now.Add(-time.Hour), notAfter: now.Add(DefaultValidity)}
	for _, opt := range opts {
		opt(&o)
	}
	if !o.notAfter.After(o.notBefore) {
		return nil, fmt.Errorf("CA %q: NotAfter %s is not after NotBefore %s", cn, o.notAfter, o.notBefore)
	}
	key, keyPEM, err := newKey(o.keyType)
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", cn, err)
	}
	subject := o.subject
	subject.CommonName = cn
	tmpl := &x509.Certificate{
		Subject:               subject,
		NotBefore:             o.notBefore,
		NotAfter:              o.notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	cert, certPEM, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA %q: %w", cn, err)
	}
	return &CA{Cert: cert, Key: key, PEM: certPEM, KeyPEM: keyPEM, keyType: o.keyType}, nil
}

// newKey generates a key of type k and its PEM.
func newKey(k KeyType) (crypto.Signer, []byte, error) {
	switch k {
	case ECDSAP256:
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	case RSA2048:
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, nil, err
		}
		return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), nil
	default:
		return nil, nil, fmt.Errorf("unknown key type %s", k)
	}
}

// sign gives tmpl a random serial, signs it with the parent's key and
// returns it parsed and in PEM. The serial is positive and at most 127 bits:
// unique without coordination, and within RFC 5280's 20 octets.
func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, parentKey crypto.Signer) (*x509.Certificate, []byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("serial number: %w", err)
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
