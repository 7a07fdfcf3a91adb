package policy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCA is a self-signed CA certificate as a caBundle would carry it.
type testCA struct {
	PEM []byte
	FP  Fingerprint
}

// Short is the short fingerprint messages show.
func (c testCA) Short() string { return c.FP.Short() }

// generateCA makes a self-signed ECDSA P-256 CA certificate. The subject and
// extensions are filled like a real cluster CA's so that one PEM is close to
// the 1 KB of the CAs found in real caBundles.
func generateCA(cn string) (testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return testCA{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return testCA{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         cn,
			Organization:       []string{"webhook-guard unit tests"},
			OrganizationalUnit: []string{"policy package", "certificate authority"},
			Country:            []string{"NL"},
			Province:           []string{"Noord-Holland"},
			Locality:           []string{"Amsterdam"},
		},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{cn, cn + ".webhook-guard-system.svc", cn + ".webhook-guard-system.svc.cluster.local"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return testCA{}, err
	}
	return testCA{
		PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		FP:  sha256.Sum256(der),
	}, nil
}

// fixtures are the CAs shared by every test of the binary: generated once,
// because key generation dominates the run time otherwise.
type fixtures struct {
	// Owner is the koordinator mapping's current CA; OwnerNew the one it
	// rotates to.
	Owner, OwnerNew testCA
	// Foreign is a CA no mapping trusts (another replica's self-signed CA).
	Foreign testCA
	// Inline is the CA of the mapping with an inline pem source.
	Inline testCA
	// KeyPEM is a PEM-encoded private key, pasted where a CA belongs.
	KeyPEM []byte
}

var (
	fixturesOnce sync.Once
	fixturesVal  *fixtures
	fixturesErr  error
)

func testFixtures(tb testing.TB) *fixtures {
	tb.Helper()
	fixturesOnce.Do(func() {
		f := &fixtures{}
		for _, c := range []struct {
			dst *testCA
			cn  string
		}{{&f.Owner, "koord-ca"}, {&f.OwnerNew, "koord-ca-2"}, {&f.Foreign, "replica-3-ca"}, {&f.Inline, "inline-ca"}} {
			if *c.dst, fixturesErr = generateCA(c.cn); fixturesErr != nil {
				return
			}
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			fixturesErr = err
			return
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			fixturesErr = err
			return
		}
		f.KeyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
		fixturesVal = f
	})
	require.NoError(tb, fixturesErr)
	return fixturesVal
}

// bundle concatenates PEM bundles, as a rotation writes old+new.
func bundle(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// indent indents every line of s by n spaces, to embed PEM in YAML.
func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// mustLoad loads a configuration that the test expects to be valid.
func mustLoad(tb testing.TB, yaml string) *Config {
	tb.Helper()
	c, err := Load([]byte(yaml))
	require.NoError(tb, err)
	return c
}

// sa is the username of the service account "namespace/name".
func sa(ns, name string) string { return fmt.Sprintf("system:serviceaccount:%s:%s", ns, name) }
