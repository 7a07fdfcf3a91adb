package policyca

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/casource"
)

const injectedConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
  - name: app
    mode: enforce
    match: {validating: [app-validating], mutating: [app-mutating]}
    writers: {serviceAccounts: [app/controller]}
    ca: {injectedByCertManager: {}}
`

// rotatingSource answers each read with the next CA of its source, as a
// Certificate rotating between two reads does.
type rotatingSource struct {
	sources map[string]string // annotation value -> source key
	cas     [][]byte
	reads   int
}

func (r *rotatingSource) Resolve(_ context.Context, req casource.Request, _ bool) casource.Result {
	set, err := cabundle.NewCASet("test", r.cas[r.reads%len(r.cas)])
	r.reads++
	var out casource.Result
	out.Resolved, out.Set, out.Err = true, set, err
	out.Source = r.sources[req.Annotations[casource.AnnotationInjectCAFrom]]
	return out
}

func Test_resolveInjected(t *testing.T) {
	oldCA, err := testpki.NewCA("old")
	require.NoError(t, err)
	newCA, err := testpki.NewCA("new")
	require.NoError(t, err)
	tests := []struct {
		name       string
		injectFrom [2]string // validating, mutating
		wantErr    string
	}{
		{
			// The Certificate rotates between the reads of the two
			// configurations: still one CA, the first answer.
			name:       "same Certificate read twice across a rotation",
			injectFrom: [2]string{"app/serving", "app/serving"},
		},
		{
			name:       "two Certificates with different CAs",
			injectFrom: [2]string{"app/serving", "app/other"},
			wantErr:    "ValidatingWebhookConfiguration app-validating and MutatingWebhookConfiguration app-mutating inject different CAs",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := policy.Load([]byte(injectedConfig))
			require.NoError(t, err)
			annotated := func(v string) metav1.ObjectMeta {
				return metav1.ObjectMeta{Annotations: map[string]string{casource.AnnotationInjectCAFrom: v}}
			}
			vwc := &admv1.ValidatingWebhookConfiguration{ObjectMeta: annotated(tt.injectFrom[0])}
			vwc.Name = "app-validating"
			mwc := &admv1.MutatingWebhookConfiguration{ObjectMeta: annotated(tt.injectFrom[1])}
			mwc.Name = "app-mutating"
			reader := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(vwc, mwc).Build()
			src := &rotatingSource{
				sources: map[string]string{"app/serving": "Certificate app/serving", "app/other": "Certificate app/other"},
				cas:     [][]byte{oldCA.PEM, newCA.PEM},
			}

			ca, err := resolveInjected(t.Context(), cfg, &cfg.Spec.Owners[0], src, reader, true)

			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, oldCA.PEM, ca.PEM)
			assert.Equal(t, []policy.Pointer{{CAFrom: "app/serving"}}, ca.Pointers, "the pointer the CA was resolved from, once")
		})
	}
}

// recordingSource answers every read with one CA and remembers the
// requests.
type recordingSource struct {
	ca   []byte
	reqs []casource.Request
}

func (r *recordingSource) Resolve(_ context.Context, req casource.Request, _ bool) casource.Result {
	r.reqs = append(r.reqs, req)
	set, err := cabundle.NewCASet("pinned Certificate app/serving", r.ca)
	var out casource.Result
	out.Resolved, out.Set, out.Err, out.Source = true, set, err, set.Source
	return out
}

// Test_Resolve_pinned: a pinned injectedByCertManager mapping resolves
// its CA from the pin, as a fixed source: no configuration is read (a
// mapping of CRDs and APIServices alone has none) and the resolver is asked
// without annotations, so no object's annotation chooses the CA.
func Test_Resolve_pinned(t *testing.T) {
	ca, err := testpki.NewCA("pinned")
	require.NoError(t, err)
	cfg, err := policy.Load([]byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
  - name: widgets
    mode: enforce
    match: {customResourceDefinitions: [widgets.example.com], apiServices: [v1.metrics.example.com]}
    writers: {serviceAccounts: [app/controller]}
    ca: {injectedByCertManager: {certificate: {namespace: app, name: serving}}}
`))
	require.NoError(t, err)
	src := &recordingSource{ca: ca.PEM}
	reader := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()

	res := Resolve(t.Context(), cfg, src, reader, true)

	require.Contains(t, res.CAs, "widgets")
	assert.Empty(t, res.CAs["widgets"].Err)
	assert.Equal(t, ca.PEM, res.CAs["widgets"].PEM)
	assert.Empty(t, res.Transient)
	require.Len(t, src.reqs, 1)
	assert.Nil(t, src.reqs[0].Annotations)
	assert.Equal(t, "widgets", src.reqs[0].Owner.Name)
}
