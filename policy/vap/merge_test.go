package vap

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

// pool is what kube-apiserver trusts for a caBundle: the certificates
// x509.CertPool.AppendCertsFromPEM reads from it.
func pool(bundles ...[]byte) *x509.CertPool {
	p := x509.NewCertPool()
	for _, b := range bundles {
		p.AppendCertsFromPEM(b)
	}
	return p
}

// brokenEnd is pemData with its END line's newline replaced by a
// character: kube-apiserver's PEM parser skips the block.
func brokenEnd(pemData []byte) []byte {
	return append(bytes.TrimSuffix(slices.Clone(pemData), []byte("\n")), 'x')
}

// withResidue returns head, some text kube-apiserver skips, then tail, the
// whole of a length that is r modulo 3.
func withResidue(head, tail []byte, r int) []byte {
	for n := 0; ; n++ {
		b := slices.Concat(head, []byte(strings.Repeat("#", n)+"\n"), tail)
		if len(b)%3 == r {
			return b
		}
	}
}

// Test_rotation_mergeActivatesNothing: the merge check accepts a bundle only
// when kube-apiserver parses it to the stored certificates followed by the
// owner's CA. A foreign certificate stored behind a broken END line is
// skipped by the parser; a "merge" whose mixed base64 group rewrote that
// line's last byte into a newline would switch it on, and is denied, for
// every length of the stored bundle at which the group rewrites it, with
// the CA as a literal and as the Secret param alike. Merges after stored
// bundles that end with a whole footer line are allowed, whatever
// else they hold, and parse to exactly the stored certificates plus the CA.
func Test_rotation_mergeActivatesNothing(t *testing.T) {
	cas, foreign := casByResidue(t)
	cfg := load(t, rotationConfig)
	cainjector := &user.DefaultInfo{Name: "system:serviceaccount:cert-manager:cert-manager-cainjector"}
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	layouts := map[string]*guardapi.KeyRef{"CA literal": nil, "CA Secret as param": param}
	// decide is the policies' messages for cainjector writing entry w1 from
	// old to next, with the owner's CA ca in the policy (and the param).
	decide := func(t *testing.T, p *guardapi.KeyRef, ca, old, next []byte) []string {
		t.Helper()
		objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": {PEM: ca, Source: "Secret app-system/app-ca", Param: p}}})
		require.NoError(t, err)
		r := vaptest.Request{Operation: admission.Update, Name: "app", User: cainjector, Object: webhookConfig(next), Old: webhookConfig(old)}
		if p != nil {
			r.Params = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app-system", Name: "app-ca"}, Data: map[string][]byte{"ca.crt": ca}}
		}
		return compileAll(t, objs).validate(t, r, p != nil)
	}

	for _, r := range []int{1, 2} {
		for _, ca := range cas {
			stored := withResidue(cas[(r+1)%3].PEM, brokenEnd(foreign.PEM), r)
			// The group that mixes the stored bundle's last byte with the
			// CA's first two (r 1) or its last two with the CA's first
			// (r 2) is "\n--" or "-\n-": a newline where "x" was.
			repaired := slices.Concat(stored[:len(stored)-1], []byte("\n"), ca.PEM)
			name := fmt.Sprintf("stored length %d mod 3, CA length %d mod 3", r, len(ca.PEM)%3)
			require.True(t, pool(stored).Equal(pool(cas[(r+1)%3].PEM)), "%s: kube-apiserver skips the foreign block while stored", name)
			require.True(t, pool(repaired).Equal(pool(cas[(r+1)%3].PEM, foreign.PEM, ca.PEM)), "%s: and trusts it after the rewrite", name)
			for layout, p := range layouts {
				t.Run(layout+"/"+name+"/a foreign block behind a broken END line is not switched on", func(t *testing.T) {
					msgs := decide(t, p, ca.PEM, stored, repaired)
					require.Len(t, msgs, 1)
					assert.Contains(t, msgs[0], "ca-mismatch: the caBundle of webhook(s) w1.app.io")
				})
			}
		}
	}

	// Stored bundles a merge may follow: each ends with a whole footer line,
	// and holds what kube-apiserver skips before it.
	prev := cas[0].PEM
	storedBundles := map[string][]byte{
		"the previous CA":                          prev,
		"text before the previous CA":              slices.Concat([]byte("# the previous CA\n"), prev),
		"a block with a header before the footer":  slices.Concat(testpki.WithPEMHeaders(foreign.PEM), prev),
		"a broken foreign block before the footer": slices.Concat(brokenEnd(foreign.PEM), []byte("\n"), prev),
		"a BEGIN line without an END line":         slices.Concat([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n"), prev),
		"a block of another type":                  slices.Concat([]byte("-----BEGIN X-----\nAAAA\n-----END X-----\n"), prev),
	}
	for name, stored := range storedBundles {
		require.True(t, bytes.HasSuffix(stored, []byte("\n-----END CERTIFICATE-----\n")), name)
		for _, ca := range cas[1:] {
			for _, pad := range []string{"", "#\n", "##\n"} {
				stored := slices.Concat([]byte(pad), stored)
				merged := slices.Concat(stored, ca.PEM)
				name := fmt.Sprintf("%s, stored length %d mod 3, CA length %d mod 3", name, len(stored)%3, len(ca.PEM)%3)
				require.True(t, pool(merged).Equal(pool(stored, ca.PEM)), "%s: the merge parses to the stored certificates and the CA", name)
				for layout, p := range layouts {
					t.Run(layout+"/"+name+"/the merge is allowed", func(t *testing.T) {
						assert.Empty(t, decide(t, p, ca.PEM, stored, merged))
					})
				}
			}
		}
	}

	t.Run("a stored bundle whose END line is broken cannot be merged after, even left as it is", func(t *testing.T) {
		stored := withResidue(prev, brokenEnd(foreign.PEM), 0)
		for layout, p := range layouts {
			assert.Len(t, decide(t, p, cas[1].PEM, stored, slices.Concat(stored, cas[1].PEM)), 1, layout)
		}
	})
	t.Run("a CA source with text before its certificate: replaced, not merged", func(t *testing.T) {
		ca := slices.Concat([]byte("# the owner's CA\n"), cas[1].PEM)
		for layout, p := range layouts {
			assert.Empty(t, decide(t, p, ca, prev, ca), layout)
			assert.Len(t, decide(t, p, ca, prev, slices.Concat(prev, ca)), 1, layout)
		}
	})
}
