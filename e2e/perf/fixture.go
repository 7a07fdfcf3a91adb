// Package perf measures webhook-guard against the JSON-decode floor, against
// controller-runtime's generic admission path, and against the same policy
// run by Kubernetes' CEL admission engine and by OPA Rego (docs/performance.md). It is
// its own Go module so the product never carries OPA or the apiserver's
// admission machinery. `make bench` runs the benchmarks and prints one table
// (cmd/benchtable); `make loadtest` runs TestLoad against the built binary.
package perf

import (
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	admv1 "k8s.io/api/admissionregistration/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

// The owner of the generated configuration, as in the incident behind the
// guard (docs/design.md): Koordinator's webhook configuration.
const (
	OwnerNamespace = "koordinator-system"
	OwnerSA        = "koord-manager"
	OwnerUser      = "system:serviceaccount:" + OwnerNamespace + ":" + OwnerSA
	ConfigName     = "koord-validating-webhook-configuration"
	CASecret       = "webhook-certs"
)

// GuardConfigYAML is the policy every engine runs: the owner's service
// account may write, and every caBundle written must hold the owner's CA.
const GuardConfigYAML = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: enforce
breakGlass:
  groups: [system:masters]
owners:
  - name: koordinator
    match:
      validating: [` + ConfigName + `]
    writers:
      serviceAccounts: [` + OwnerNamespace + `/` + OwnerSA + `]
    ca:
      secret: {namespace: ` + OwnerNamespace + `, name: ` + CASecret + `, key: ca.crt}
`

// CA is a self-signed RSA-2048 CA, the kind controllers generate: its PEM
// is ~1.1 KB.
type CA struct {
	PEM []byte
}

// NewCA generates a CA valid for ten years.
func NewCA(cn string) (CA, error) {
	now := time.Now()
	ca, err := testpki.NewCA(cn,
		testpki.WithKeyType(testpki.RSA2048),
		testpki.WithSubject(pkix.Name{Organization: []string{"koordinator"}}),
		testpki.WithValidity(now.Add(-time.Hour), now.Add(10*365*24*time.Hour)))
	if err != nil {
		return CA{}, err
	}
	return CA{PEM: ca.PEM}, nil
}

// Fixture is one generated review and everything needed to decide it.
type Fixture struct {
	// Old is the owner's current CA; New the CA it rotates to. The CA
	// source holds both (a rotation overlap), so the review is allowed.
	Old, New CA
	// Entries is the number of webhooks[] entries.
	Entries int
	// Review is the AdmissionReview kube-apiserver sends: an UPDATE by the
	// owner that rotates every entry's caBundle from Old to New.
	Review []byte
}

// NewFixture generates the review for n entries.
func NewFixture(oldCA, newCA CA, n int) (*Fixture, error) {
	f := &Fixture{Old: oldCA, New: newCA, Entries: n}
	obj, old := configuration(n, newCA.PEM), configuration(n, oldCA.PEM)
	old.ResourceVersion = "41"
	objRaw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	oldRaw, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             types.UID("705ab4f5-6393-11e8-b7cc-42010a800002"),
			Kind:            metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
			Resource:        metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
			RequestKind:     &metav1.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
			RequestResource: &metav1.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
			Name:            ConfigName,
			Operation:       admissionv1.Update,
			UserInfo: authnv1.UserInfo{
				Username: OwnerUser,
				UID:      "0f7c5a6e-9a54-4a6b-8d1e-3f2c1b0a9e8d",
				Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + OwnerNamespace, "system:authenticated"},
				Extra: map[string]authnv1.ExtraValue{
					"authentication.kubernetes.io/pod-name": {"koord-manager-7d9f8b6c5-x2x4z"},
					"authentication.kubernetes.io/pod-uid":  {"3b1f2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"},
				},
			},
			Object:    runtimeRaw(objRaw),
			OldObject: runtimeRaw(oldRaw),
			DryRun:    new(false),
			Options:   runtimeRaw([]byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"koord-manager"}`)),
		},
	}
	if f.Review, err = json.Marshal(review); err != nil {
		return nil, err
	}
	return f, nil
}

// configuration is a ValidatingWebhookConfiguration as kube-apiserver stores
// it: defaults filled and managedFields present.
func configuration(n int, caPEM []byte) *admv1.ValidatingWebhookConfiguration {
	fail, exact, none := admv1.Fail, admv1.Equivalent, admv1.SideEffectClassNone
	scope := admv1.NamespacedScope
	c := &admv1.ValidatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              ConfigName,
			UID:               "a5f3c2e1-7b8d-4e9f-a0b1-c2d3e4f5a6b7",
			ResourceVersion:   "42",
			Generation:        7,
			CreationTimestamp: metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			Labels:            map[string]string{"app.kubernetes.io/name": "koordinator", "app.kubernetes.io/component": "webhook"},
			Annotations:       map[string]string{"meta.helm.sh/release-name": "koordinator", "meta.helm.sh/release-namespace": OwnerNamespace},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "admissionregistration.k8s.io/v1",
					Time: &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, FieldsType: "FieldsV1",
					FieldsV1: fieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:meta.helm.sh/release-name":{},"f:meta.helm.sh/release-namespace":{}},"f:labels":{".":{},"f:app.kubernetes.io/component":{},"f:app.kubernetes.io/name":{}}},"f:webhooks":{}}`)},
				{Manager: "koord-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "admissionregistration.k8s.io/v1",
					Time: &metav1.Time{Time: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}, FieldsType: "FieldsV1",
					FieldsV1: fieldsV1(`{"f:webhooks":{"k:{\"name\":\"vpod.koordinator.sh\"}":{"f:clientConfig":{"f:caBundle":{}}}}}`)},
			},
		},
	}
	for i := range n {
		c.Webhooks = append(c.Webhooks, admv1.ValidatingWebhook{
			Name: fmt.Sprintf("v%d.koordinator.sh", i),
			ClientConfig: admv1.WebhookClientConfig{
				Service:  &admv1.ServiceReference{Namespace: OwnerNamespace, Name: "koordinator-webhook-service", Path: new(fmt.Sprintf("/validate-%d", i)), Port: new(int32(443))},
				CABundle: caPEM,
			},
			Rules: []admv1.RuleWithOperations{{
				Operations: []admv1.OperationType{admv1.Create, admv1.Update},
				Rule:       admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}, Scope: &scope},
			}},
			FailurePolicy:           &fail,
			MatchPolicy:             &exact,
			NamespaceSelector:       &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "koordinator.sh/webhook", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}}}},
			ObjectSelector:          &metav1.LabelSelector{},
			SideEffects:             &none,
			TimeoutSeconds:          new(int32(10)),
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
		})
	}
	return c
}

func fieldsV1(s string) *metav1.FieldsV1 {
	f := &metav1.FieldsV1{}
	f.SetRawString(s)
	return f
}

func runtimeRaw(b []byte) runtime.RawExtension { return runtime.RawExtension{Raw: b} }

// Guard is the guard's decision path as `serve` wires it: the generated
// config, the CA Secret (old+new CA) behind casource's cache, and the
// fingerprint cache.
func Guard(f *Fixture, configYAML string, secrets ...*corev1.Secret) (*webhook.Handler, error) {
	cfg, err := policy.Load([]byte(configYAML))
	if err != nil {
		return nil, err
	}
	scheme, err := webhook.NewScheme()
	if err != nil {
		return nil, err
	}
	if secrets == nil {
		secrets = []*corev1.Secret{OwnerSecret(OwnerNamespace, CASecret, f)}
	}
	objs := make([]client.Object, len(secrets))
	for i, s := range secrets {
		objs[i] = s
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return webhook.NewHandler(webhook.HandlerOptions{
		Config: webhook.StaticConfig{Config: cfg},
		// A TTL far beyond the run: every benchmark iteration is a warm hit.
		CA:           casource.New(reader, casource.Options{TTL: time.Hour}),
		Metrics:      webhook.NewMetrics(prometheus.NewRegistry()),
		Recorder:     webhook.LogRecorder{},
		Fingerprints: cabundle.NewFingerprintCache(0),
	})
}

// OwnerSecret is the owner's CA Secret holding the rotation overlap.
func OwnerSecret(namespace, name string, f *Fixture) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       map[string][]byte{"ca.crt": append(append([]byte{}, f.Old.PEM...), f.New.PEM...)},
	}
}

// Warm sends the review once so the CA and fingerprint caches are filled,
// and checks the guard allows it (the benchmarks time the allow path).
func Warm(ctx context.Context, h *webhook.Handler, f *Fixture) error {
	if v := h.Review(ctx, f.Review); !v.Response.Allowed {
		return fmt.Errorf("the guard did not allow the generated review: %+v", v.Response.Result)
	}
	return nil
}
