package cabundle

import (
	"crypto/sha256"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// testCA is a self-signed CA with the fingerprint of its certificate.
type testCA struct {
	*testpki.CA
	FP Fingerprint
}

// fixtures are the CAs shared by every test of the binary: Owner and
// OwnerNew as an owner's CA before and after a rotation, Foreign as a CA no
// owner trusts, Inline as one more, and a private key (KeyPEM) pasted where
// a CA belongs.
type fixtures struct {
	Owner, OwnerNew, Foreign, Inline testCA
	KeyPEM                           []byte
}

// newFixtures generates the CAs once: key generation dominates the run
// time otherwise.
var newFixtures = sync.OnceValues(func() (*fixtures, error) {
	cas := make([]testCA, 4)
	for i, cn := range []string{"koord-ca", "koord-ca-2", "replica-3-ca", "inline-ca"} {
		ca, err := testpki.NewCA(cn)
		if err != nil {
			return nil, err
		}
		cas[i] = testCA{CA: ca, FP: sha256.Sum256(ca.Cert.Raw)}
	}
	return &fixtures{Owner: cas[0], OwnerNew: cas[1], Foreign: cas[2], Inline: cas[3], KeyPEM: cas[3].KeyPEM}, nil
})

func testFixtures(tb testing.TB) *fixtures {
	tb.Helper()
	f, err := newFixtures()
	require.NoError(tb, err)
	return f
}
