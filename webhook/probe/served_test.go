package probe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// Test_Served_Check: after a round, a caBundle is checked against what the
// entry's endpoint served, in memory: the CA that signed the served leaf
// verifies, another CA does not (with the reason and the endpoint), an
// entry the round did not reach is unknown, and the next round replaces
// the chains.
func Test_Served_Check(t *testing.T) {
	ca, other := testpki.MustCA(t, "served-ca"), testpki.MustCA(t, "other-ca")
	leaf, err := ca.Issue("webhook", "127.0.0.1")
	require.NoError(t, err)
	addr := serveTLS(t, leaf)
	path := TrustPath{Kind: "ValidatingWebhookConfiguration", Configuration: "app", Webhook: "w.example.com", URL: "https://" + addr, CABundle: other.PEM}
	gone := TrustPath{Kind: "ValidatingWebhookConfiguration", Configuration: "app", Webhook: "gone.example.com", URL: "https://" + closedAddr(t), CABundle: ca.PEM}

	var s Served
	results := (&Prober{}).Probe(t.Context(), []TrustPath{path, gone})
	require.Equal(t, ReasonUnknownAuthority, results[0].Reason, "the stored bundle does not verify: the chain is kept all the same")
	s.Store(results)

	verified, known, detail := s.Check(path.Key(), ca.PEM, time.Now())
	assert.True(t, known)
	assert.True(t, verified, detail)
	both := append(append([]byte{}, other.PEM...), ca.PEM...)
	verified, _, _ = s.Check(path.Key(), both, time.Now())
	assert.True(t, verified, "a bundle holding the served CA among others verifies")

	verified, known, detail = s.Check(path.Key(), other.PEM, time.Now())
	assert.True(t, known)
	assert.False(t, verified)
	assert.Contains(t, detail, "unknown-authority at "+addr)

	_, known, detail = s.Check(path.Key(), []byte("not PEM"), time.Now())
	assert.True(t, known)
	assert.Contains(t, detail, "no-ca-bundle")

	_, known, _ = s.Check(gone.Key(), ca.PEM, time.Now())
	assert.False(t, known, "an unreachable endpoint served nothing to compare with")

	s.Store(nil)
	_, known, _ = s.Check(path.Key(), ca.PEM, time.Now())
	assert.False(t, known, "the next round replaces the chains")

	var none *Served
	_, known, _ = none.Check(path.Key(), ca.PEM, time.Now())
	assert.False(t, known, "no prober: nothing known")
}

// Test_Served_Check_everyEndpointMustFail: a caBundle is refused only when
// it verifies what no endpoint of the entry served. One endpoint a
// non-writer got into the Service's endpoints, serving a leaf under its
// own CA, does not make the owner's bundle (which verifies the others)
// unverified; a bundle that verifies no endpoint is, naming the first.
// An entry whose ready endpoints were not all probed is not judged.
func Test_Served_Check_everyEndpointMustFail(t *testing.T) {
	owner, planted, third := testpki.MustCA(t, "owner-ca"), testpki.MustCA(t, "planted-ca"), testpki.MustCA(t, "third-ca")
	issue := func(ca *testpki.CA) *testpki.Leaf {
		l, err := ca.Issue("webhook", "hook.app.svc")
		require.NoError(t, err)
		return l
	}
	served, plant := serveTLS(t, issue(owner)), serveTLS(t, issue(planted))
	path := TrustPath{Kind: "ValidatingWebhookConfiguration", Configuration: "app", Webhook: "w.example.com",
		Service: &ServiceRef{Namespace: "app", Name: "hook", Port: 443}, CABundle: owner.PEM}
	endpoints := fixedEndpoints{"app/hook": {served, plant}}

	var s Served
	results := (&Prober{Endpoints: endpoints}).Probe(t.Context(), []TrustPath{path})
	require.Equal(t, ReasonUnknownAuthority, results[0].Reason, "the round reports the endpoint that fails")
	s.Store(results)
	verified, known, detail := s.Check(path.Key(), owner.PEM, time.Now())
	assert.True(t, known)
	assert.True(t, verified, "the owner's bundle verifies what the Service's other endpoint serves: %s", detail)
	verified, known, detail = s.Check(path.Key(), third.PEM, time.Now())
	assert.True(t, known)
	assert.False(t, verified)
	assert.Contains(t, detail, "unknown-authority at ")
	assert.Contains(t, detail, "and at every other of its 2 endpoints for hook.app.svc")

	s.Store((&Prober{Endpoints: endpoints, MaxEndpoints: 1}).Probe(t.Context(), []TrustPath{path}))
	_, known, _ = s.Check(path.Key(), third.PEM, time.Now())
	assert.False(t, known, "one of two ready endpoints probed: nothing to judge a write on")
}
