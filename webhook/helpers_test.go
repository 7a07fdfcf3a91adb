package webhook

import (
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// testCA is a self-signed ECDSA CA that can issue serving certificates.
type testCA struct{ *testpki.CA }

// Short is the short fingerprint messages show for this CA.
func (c *testCA) Short() string {
	return cabundle.Fingerprint(sha256.Sum256(c.Cert.Raw)).Short()
}

func newTestCA(tb testing.TB, cn string) *testCA {
	tb.Helper()
	ca, err := testpki.NewCA(cn, testpki.WithSubject(pkix.Name{Organization: []string{"webhook-guard unit tests"}}))
	require.NoError(tb, err)
	return &testCA{ca}
}

// issue signs a serving certificate for 127.0.0.1 and returns it and its key
// in PEM, as cert-manager writes tls.crt and tls.key, and its serial.
func (c *testCA) issue(tb testing.TB) (certPEM, keyPEM []byte, serial *big.Int) {
	tb.Helper()
	const name = "webhook-guard.webhook-guard-system.svc"
	leaf, err := c.Issue(name, "127.0.0.1", name)
	require.NoError(tb, err)
	return leaf.CertPEM, leaf.KeyPEM, leaf.Cert.SerialNumber
}

// fixtures are the CAs shared by the tests of this package, generated once.
type fixtures struct {
	// Owner is the owners' current CA, OwnerNew the one they rotate to.
	Owner, OwnerNew *testCA
	// Foreign is a CA no mapping trusts.
	Foreign *testCA
}

var (
	fixturesOnce sync.Once
	fixturesVal  *fixtures
)

func testFixtures(tb testing.TB) *fixtures {
	tb.Helper()
	fixturesOnce.Do(func() {
		fixturesVal = &fixtures{
			Owner:    newTestCA(tb, "owner-ca"),
			OwnerNew: newTestCA(tb, "owner-ca-2"),
			Foreign:  newTestCA(tb, "foreign-ca"),
		}
	})
	require.NotNil(tb, fixturesVal)
	return fixturesVal
}

// guardConfigDoc is the configuration the handler tests run against: an
// enforced mapping (koordinator), an audited one (audited), break-glass for
// system:masters, and an inline-pem mapping (legacy) whose CA is the owner CA.
func guardConfigDoc(f *fixtures) string {
	return `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: audit
breakGlass: {groups: [system:masters]}
owners:
- name: koordinator
  mode: enforce
  match: {validating: [koord], mutating: [koord]}
  writers: {serviceAccounts: [koordinator-system/koord-manager]}
  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}
- name: audited
  match: {validating: [audited], mutating: [audited]}
  writers: {serviceAccounts: [audited-system/controller]}
  ca: {secret: {namespace: audited-system, name: ca}}
- name: team-a
  mode: enforce
  match: {labelSelector: {matchLabels: {team: a}}}
  writers: {serviceAccounts: [team-a/controller]}
  ca: {secret: {namespace: team-a, name: ca}}
- name: legacy
  mode: enforce
  match: {validating: [legacy]}
  writers: {users: [legacy-operator]}
  ca:
    pem: |
` + testpki.Indent(string(f.Owner.PEM), 6) + "\n"
}

func mustLoad(tb testing.TB, doc string) *policy.Mappings {
	tb.Helper()
	cfg, err := policy.Load([]byte(doc))
	require.NoError(tb, err)
	return cfg
}

// Identities used throughout.
const (
	koordManager = "system:serviceaccount:koordinator-system:koord-manager"
	auditedOwner = "system:serviceaccount:audited-system:controller"
	teamAOwner   = "system:serviceaccount:team-a:controller"
	intruder     = "system:serviceaccount:intruder-system:intruder"
)

// object describes a webhook configuration to encode as kube-apiserver
// sends it.
type object struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	// Bundles are the caBundles of the webhooks entries, named
	// <name>-<i>.example.com.
	Bundles [][]byte
}

// encode marshals the typed Kubernetes object of kind, so that caBundle is
// base64 in the JSON exactly as kube-apiserver sends it.
func (o object) encode(tb testing.TB, kind policy.GuardedKind) []byte {
	tb.Helper()
	meta := metav1.ObjectMeta{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations, UID: "0c1b8d3c-0000-4000-8000-000000000001", ResourceVersion: "42"}
	var v any
	switch kind {
	case policy.KindValidating:
		c := admv1.ValidatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: string(kind)},
			ObjectMeta: meta,
		}
		for i, b := range o.Bundles {
			c.Webhooks = append(c.Webhooks, admv1.ValidatingWebhook{
				Name:                    o.webhookName(i),
				ClientConfig:            admv1.WebhookClientConfig{CABundle: b, Service: &admv1.ServiceReference{Namespace: "ns", Name: "svc"}},
				AdmissionReviewVersions: []string{"v1"},
			})
		}
		v = c
	case policy.KindMutating:
		c := admv1.MutatingWebhookConfiguration{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: string(kind)},
			ObjectMeta: meta,
		}
		for i, b := range o.Bundles {
			c.Webhooks = append(c.Webhooks, admv1.MutatingWebhook{
				Name:                    o.webhookName(i),
				ClientConfig:            admv1.WebhookClientConfig{CABundle: b, Service: &admv1.ServiceReference{Namespace: "ns", Name: "svc"}},
				AdmissionReviewVersions: []string{"v1"},
			})
		}
		v = c
	case policy.KindCRD, policy.KindAPIService, policy.KindAdmissionPolicy, policy.KindAdmissionPolicyBinding:
		tb.Fatalf("encode makes webhook configurations, not a %s", kind)
	}
	data, err := json.Marshal(v)
	require.NoError(tb, err)
	return data
}

func (o object) webhookName(i int) string { return fmt.Sprintf("%s-%d.example.com", o.Name, i) }

// webhooks is what the decoder makes of o's webhooks entries: each calls
// Service ns/svc.
func (o object) webhooks() []policy.Entry {
	out := make([]policy.Entry, len(o.Bundles))
	for i, b := range o.Bundles {
		out[i] = policy.Entry{Name: o.webhookName(i), CABundle: b, Endpoint: policy.Endpoint{Namespace: "ns", Name: "svc"}}
	}
	return out
}

// request builds an AdmissionRequest as kube-apiserver sends it. obj or old
// nil leaves request.object or request.oldObject out.
func request(tb testing.TB, op admissionv1.Operation, kind policy.GuardedKind, user string, obj, old *object) *admissionv1.AdmissionRequest {
	tb.Helper()
	resource := "validatingwebhookconfigurations"
	if kind == policy.KindMutating {
		resource = "mutatingwebhookconfigurations"
	}
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("705ab4f5-6393-11e8-b7cc-42010a800002"),
		Kind:      metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: string(kind)},
		Resource:  metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource},
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}},
	}
	if obj != nil {
		req.Name = obj.Name
		req.Object = runtime.RawExtension{Raw: obj.encode(tb, kind)}
	}
	if old != nil {
		req.Name = old.Name
		req.OldObject = runtime.RawExtension{Raw: old.encode(tb, kind)}
	}
	return req
}

// newHandler is NewHandler failing the test on error.
func newHandler(tb testing.TB, o HandlerOptions) *Handler {
	tb.Helper()
	h, err := NewHandler(o)
	require.NoError(tb, err)
	return h
}

// answer sends req through the guard's one request path, encoded as the
// AdmissionReview kube-apiserver sends and decoded by the guard's decoder,
// and returns the response after checking it carries the request's uid
// (then cleared, so expectations need not repeat it).
func answer(tb testing.TB, h *Handler, req *admissionv1.AdmissionRequest) admissionv1.AdmissionResponse {
	tb.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	require.NoError(tb, err)
	v := h.Review(tb.Context(), body)
	require.NotNil(tb, v.Response)
	assert.Equal(tb, req.UID, v.Response.UID, "the response carries the request's uid")
	resp := *v.Response
	resp.UID = ""
	return resp
}
