package policy

import (
	"crypto/sha256"
	"crypto/x509/pkix"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// testCA is a self-signed CA certificate as a caBundle would carry it.
type testCA struct {
	PEM []byte
	FP  cabundle.Fingerprint
	// KeyPEM is the CA's private key in PEM.
	KeyPEM []byte
}

// Short is the short fingerprint messages show.
func (c testCA) Short() string { return c.FP.Short() }

// generateCA makes a self-signed ECDSA P-256 CA certificate valid for a
// year. The subject is filled like a real cluster CA's, and the subject of a
// self-signed CA is written twice (as subject and issuer), so that one PEM is
// close to the 1 KB of the CAs found in real caBundles.
func generateCA(cn string) (testCA, error) {
	now := time.Now()
	return generateCAValid(cn, now.Add(-time.Hour), now.Add(365*24*time.Hour))
}

// generateCAValid is generateCA with the given validity.
func generateCAValid(cn string, notBefore, notAfter time.Time) (testCA, error) {
	ca, err := testpki.NewCA(cn,
		testpki.WithValidity(notBefore, notAfter),
		testpki.WithSubject(pkix.Name{
			Organization:       []string{"webhook-guard unit tests"},
			OrganizationalUnit: []string{"policy package", "certificate authority"},
			Country:            []string{"NL"},
			Province:           []string{"Noord-Holland"},
			Locality:           []string{"Amsterdam"},
			StreetAddress:      []string{"Stationsplein 1"},
			PostalCode:         []string{"1012 AB"},
		}))
	if err != nil {
		return testCA{}, err
	}
	return testCA{PEM: ca.PEM, FP: sha256.Sum256(ca.Cert.Raw), KeyPEM: ca.KeyPEM}, nil
}

// fixtures are the CAs shared by every test of the binary: generated once,
// because key generation dominates the run time otherwise.
type fixtures struct {
	// Owner is the koordinator mapping's current CA; OwnerNew the one it
	// rotates to.
	Owner, OwnerNew testCA
	// Foreign is a CA no mapping trusts (another replica's self-signed CA).
	Foreign testCA
	// Expired is the koordinator mapping's CA before Owner; it expired
	// yesterday.
	Expired testCA
	// Inline is the CA of the mapping with an inline pem source.
	Inline testCA
	// KeyPEM is a PEM-encoded private key, pasted where a CA belongs.
	KeyPEM []byte
}

var (
	fixturesOnce sync.Once
	fixturesVal  *fixtures
	errFixtures  error
)

func testFixtures(tb testing.TB) *fixtures {
	tb.Helper()
	fixturesOnce.Do(func() {
		f := &fixtures{}
		for _, c := range []struct {
			dst *testCA
			cn  string
		}{{&f.Owner, "koord-ca"}, {&f.OwnerNew, "koord-ca-2"}, {&f.Foreign, "replica-3-ca"}, {&f.Inline, "inline-ca"}} {
			if *c.dst, errFixtures = generateCA(c.cn); errFixtures != nil {
				return
			}
		}
		now := time.Now()
		if f.Expired, errFixtures = generateCAValid("koord-ca-0", now.Add(-60*24*time.Hour), now.Add(-24*time.Hour)); errFixtures != nil {
			return
		}
		// Any private key will do; the inline CA's is at hand.
		f.KeyPEM = f.Inline.KeyPEM
		fixturesVal = f
	})
	require.NoError(tb, errFixtures)
	return fixturesVal
}

// mustLoad loads a configuration that the test expects to be valid.
func mustLoad(tb testing.TB, yaml string) *Mappings {
	tb.Helper()
	c, err := Load([]byte(yaml))
	require.NoError(tb, err)
	return c
}

// sa is the username of the service account "namespace/name".
func sa(ns, name string) string { return fmt.Sprintf("system:serviceaccount:%s:%s", ns, name) }
