package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkKey asserts that key is of type k (P-256 or 2048 bits).
func checkKey(t *testing.T, k KeyType, key any) {
	t.Helper()
	switch k {
	case ECDSAP256:
		pub, ok := key.(*ecdsa.PublicKey)
		require.True(t, ok, "want an ECDSA key, got %T", key)
		assert.Equal(t, elliptic.P256(), pub.Curve)
	case RSA2048:
		pub, ok := key.(*rsa.PublicKey)
		require.True(t, ok, "want an RSA key, got %T", key)
		assert.Equal(t, 2048, pub.N.BitLen())
	default:
		t.Fatalf("no check for %s", k)
	}
}

// checkPEM asserts that p is one PEM block of type typ and nothing else,
// and returns its bytes.
func checkPEM(t *testing.T, p []byte, typ string) []byte {
	t.Helper()
	block, rest := pem.Decode(p)
	require.NotNil(t, block, "no PEM block in %q", p)
	assert.Equal(t, typ, block.Type)
	assert.Empty(t, rest)
	return block.Bytes
}

func Test_NewCA(t *testing.T) {
	notBefore := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter := time.Date(2126, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		opts []Option
		// expNotBefore/expNotAfter zero: the default window around now.
		expNotBefore, expNotAfter time.Time
		expKey                    KeyType
		expKeyPEM                 string
		expSubject                pkix.Name
		// expPEMSize bounds len(PEM) when non-zero, as benchmarks rely on it.
		expPEMSize [2]int
	}{
		"with no options, return an ECDSA P-256 CA valid from an hour ago for a day": {
			expKey: ECDSAP256, expKeyPEM: "EC PRIVATE KEY", expSubject: pkix.Name{CommonName: "test-ca"},
		},
		"with RSA-2048, return an RSA CA whose PEM is about 1.1 KB": {
			opts:   []Option{WithKeyType(RSA2048)},
			expKey: RSA2048, expKeyPEM: "RSA PRIVATE KEY", expSubject: pkix.Name{CommonName: "test-ca"},
			expPEMSize: [2]int{1000, 1200},
		},
		"with a validity, use exactly its NotBefore and NotAfter": {
			opts:         []Option{WithValidity(notBefore, notAfter)},
			expNotBefore: notBefore, expNotAfter: notAfter,
			expKey: ECDSAP256, expKeyPEM: "EC PRIVATE KEY", expSubject: pkix.Name{CommonName: "test-ca"},
		},
		"with a subject, keep its fields and take the CommonName from cn": {
			opts:   []Option{WithSubject(pkix.Name{CommonName: "ignored", Organization: []string{"koordinator"}, Country: []string{"NL"}})},
			expKey: ECDSAP256, expKeyPEM: "EC PRIVATE KEY",
			expSubject: pkix.Name{CommonName: "test-ca", Organization: []string{"koordinator"}, Country: []string{"NL"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := time.Now()
			ca, err := NewCA("test-ca", tc.opts...)
			require.NoError(t, err)
			after := time.Now()

			assert.Equal(t, checkPEM(t, ca.PEM, "CERTIFICATE"), ca.Cert.Raw, "PEM is the parsed certificate")
			assert.True(t, ca.Cert.IsCA)
			assert.True(t, ca.Cert.BasicConstraintsValid)
			assert.NotZero(t, ca.Cert.KeyUsage&x509.KeyUsageCertSign, "a CA must be allowed to sign certificates")
			require.NoError(t, ca.Cert.CheckSignatureFrom(ca.Cert), "the CA is self-signed")
			assert.Positive(t, ca.Cert.SerialNumber.Sign())

			assert.Equal(t, tc.expSubject.CommonName, ca.Cert.Subject.CommonName)
			assert.Equal(t, tc.expSubject.Organization, ca.Cert.Subject.Organization)
			assert.Equal(t, tc.expSubject.Country, ca.Cert.Subject.Country)

			if tc.expNotAfter.IsZero() {
				// Certificates carry whole seconds.
				assert.WithinRange(t, ca.Cert.NotBefore, before.Add(-time.Hour).Truncate(time.Second), after.Add(-time.Hour))
				assert.WithinRange(t, ca.Cert.NotAfter, before.Add(DefaultValidity).Truncate(time.Second), after.Add(DefaultValidity))
			} else {
				assert.Equal(t, tc.expNotBefore, ca.Cert.NotBefore)
				assert.Equal(t, tc.expNotAfter, ca.Cert.NotAfter)
			}

			checkKey(t, tc.expKey, ca.Cert.PublicKey)
			assert.Equal(t, ca.Cert.PublicKey, ca.Key.Public(), "Key is the certificate's key")
			checkPEM(t, ca.KeyPEM, tc.expKeyPEM)
			_, err = tls.X509KeyPair(ca.PEM, ca.KeyPEM)
			assert.NoError(t, err, "KeyPEM is the key of PEM")

			if tc.expPEMSize != [2]int{} {
				assert.GreaterOrEqual(t, len(ca.PEM), tc.expPEMSize[0])
				assert.LessOrEqual(t, len(ca.PEM), tc.expPEMSize[1])
			}
		})
	}
}

func Test_NewCA_errors(t *testing.T) {
	now := time.Now()
	cases := map[string]struct {
		opts   []Option
		expErr string
	}{
		"if NotAfter is before NotBefore, fail": {
			opts:   []Option{WithValidity(now, now.Add(-time.Hour))},
			expErr: `CA "test-ca": NotAfter ` + now.Add(-time.Hour).String() + ` is not after NotBefore ` + now.String(),
		},
		"if NotAfter equals NotBefore, fail": {
			opts:   []Option{WithValidity(now, now)},
			expErr: `CA "test-ca": NotAfter ` + now.String() + ` is not after NotBefore ` + now.String(),
		},
		"if the key type is unknown, fail": {
			opts:   []Option{WithKeyType(KeyType(7))},
			expErr: `CA "test-ca": unknown key type KeyType(7)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ca, err := NewCA("test-ca", tc.opts...)
			assert.Nil(t, ca)
			assert.EqualError(t, err, tc.expErr)
		})
	}
}

func Test_CA_Issue(t *testing.T) {
	ecCA, err := NewCA("ec-ca")
	require.NoError(t, err)
	rsaCA, err := NewCA("rsa-ca", WithKeyType(RSA2048))
	require.NoError(t, err)

	cases := map[string]struct {
		ca        *CA
		hosts     []string
		expDNS    []string
		expIPs    []string
		expKey    KeyType
		expKeyPEM string
	}{
		"with no hosts, serve localhost and 127.0.0.1": {
			ca: ecCA, expDNS: []string{"localhost"}, expIPs: []string{"127.0.0.1"}, expKey: ECDSAP256, expKeyPEM: "EC PRIVATE KEY",
		},
		"with IPs and names, make IP SANs of the IPs and DNS SANs of the rest, in order": {
			ca: ecCA, hosts: []string{"127.0.0.1", "webhook-guard.webhook-guard-system.svc", "::1", "localhost"},
			expDNS: []string{"webhook-guard.webhook-guard-system.svc", "localhost"}, expIPs: []string{"127.0.0.1", "::1"},
			expKey: ECDSAP256, expKeyPEM: "EC PRIVATE KEY",
		},
		"with only an IP, make no DNS SAN": {
			ca: ecCA, hosts: []string{"127.0.0.1"}, expIPs: []string{"127.0.0.1"}, expKey: ECDSAP256, expKeyPEM: "EC PRIVATE KEY",
		},
		"with an RSA CA, issue an RSA leaf": {
			ca: rsaCA, hosts: []string{"app.example"}, expDNS: []string{"app.example"}, expKey: RSA2048, expKeyPEM: "RSA PRIVATE KEY",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			leaf, err := tc.ca.Issue("leaf", tc.hosts...)
			require.NoError(t, err)

			assert.Equal(t, checkPEM(t, leaf.CertPEM, "CERTIFICATE"), leaf.Cert.Raw, "CertPEM is the parsed certificate")
			assert.Equal(t, "leaf", leaf.Cert.Subject.CommonName)
			assert.False(t, leaf.Cert.IsCA)
			assert.Equal(t, tc.expDNS, leaf.Cert.DNSNames)
			var ips []string
			for _, ip := range leaf.Cert.IPAddresses {
				ips = append(ips, ip.String())
			}
			assert.Equal(t, tc.expIPs, ips)
			assert.Equal(t, tc.ca.Cert.NotBefore, leaf.Cert.NotBefore, "a leaf has its CA's validity")
			assert.Equal(t, tc.ca.Cert.NotAfter, leaf.Cert.NotAfter)
			checkKey(t, tc.expKey, leaf.Cert.PublicKey)
			checkPEM(t, leaf.KeyPEM, tc.expKeyPEM)
			_, err = tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
			require.NoError(t, err, "KeyPEM is the key of CertPEM")

			// A TLS client trusting only the CA accepts the leaf for each
			// of its hosts, and one trusting another CA does not.
			hosts := append(append([]string{}, tc.expDNS...), tc.expIPs...)
			roots := x509.NewCertPool()
			roots.AddCert(tc.ca.Cert)
			for _, host := range hosts {
				_, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
				assert.NoError(t, err, "verify for %s", host)
			}
			_, err = leaf.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "elsewhere.example"})
			assert.Error(t, err, "the leaf does not serve a host it was not issued for")

			other, err := NewCA("other-ca")
			require.NoError(t, err)
			others := x509.NewCertPool()
			others.AddCert(other.Cert)
			_, err = leaf.Cert.Verify(x509.VerifyOptions{Roots: others, DNSName: hosts[0]})
			assert.Error(t, err, "another CA does not vouch for the leaf")
		})
	}
}

func Test_WriteSecretFiles(t *testing.T) {
	ca, err := NewCA("test-ca")
	require.NoError(t, err)
	leaf, err := ca.Issue("webhook-guard")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "certs")

	require.NoError(t, WriteSecretFiles(dir, ca, leaf))

	exp := map[string][]byte{"tls.crt": leaf.CertPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.PEM}
	assert.Equal(t, exp, SecretData(ca, leaf))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, len(exp))
	for name, data := range exp {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, data, got, name)
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "%s holds a key or sits beside one: owner-only", name)
	}
	_, err = tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	assert.NoError(t, err, "a server can load the written key pair")
}
