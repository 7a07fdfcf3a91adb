package probe

import (
	"encoding/base64"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// guardedConfig guards the configuration "guarded", the CRD
// widgets.example.com and the APIService v1beta1.metrics.example.com.
func guardedConfig(t *testing.T) *policy.Mappings {
	t.Helper()
	cfg, err := policy.Load([]byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
- name: app
  match:
    validating: [guarded]
    customResourceDefinitions: [widgets.example.com]
    apiServices: [v1beta1.metrics.example.com]
  writers: {serviceAccounts: [app/controller]}
  ca:
    pem: |
` + testpki.Indent(string(testpki.MustCA(t, "owner-ca").PEM), 6) + "\n"))
	require.NoError(t, err)
	return cfg
}

func Test_ValidatingPaths(t *testing.T) {
	cfg := guardedConfig(t)
	ignore := admv1.Ignore
	vwc := &admv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Webhooks: []admv1.ValidatingWebhook{
			{Name: "svc.example.com", ClientConfig: admv1.WebhookClientConfig{
				Service: &admv1.ServiceReference{Namespace: "app", Name: "hook"}, CABundle: []byte("ca")}},
			{Name: "url.example.com", FailurePolicy: &ignore, ClientConfig: admv1.WebhookClientConfig{
				URL: new("https://hook.example.com:8443/v")}},
		},
	}
	require.Equal(t, []TrustPath{
		{Kind: "ValidatingWebhookConfiguration", Configuration: "guarded", Mapping: "app", Webhook: "svc.example.com", FailurePolicy: "Fail",
			Service: &ServiceRef{Namespace: "app", Name: "hook", Port: 443}, CABundle: []byte("ca")},
		{Kind: "ValidatingWebhookConfiguration", Configuration: "guarded", Mapping: "app", Webhook: "url.example.com", FailurePolicy: "Ignore",
			URL: "https://hook.example.com:8443/v"},
	}, ValidatingPaths(cfg, vwc), "the failure policy defaults to Fail and the Service port to 443")

	vwc.Name = "other"
	require.Empty(t, ValidatingPaths(cfg, vwc), "a configuration no mapping claims has no path")
}

func Test_TrustObjectPath(t *testing.T) {
	cfg := guardedConfig(t)
	b64 := base64.StdEncoding.EncodeToString([]byte("ca"))
	obj := func(kind, name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"kind": kind, "metadata": map[string]any{"name": name}, "spec": spec}}
	}
	svc := map[string]any{"namespace": "app", "name": "conv", "port": int64(8443)}
	cases := map[string]struct {
		kind   policy.GuardedKind
		obj    *unstructured.Unstructured
		want   TrustPath
		wantOK bool
	}{
		"if a guarded CRD converts through a Service, its path is conversion, fail closed, with the decoded caBundle": {
			kind: policy.KindCRD,
			obj: obj("CustomResourceDefinition", "widgets.example.com", map[string]any{"conversion": map[string]any{
				"strategy": "Webhook", "webhook": map[string]any{"clientConfig": map[string]any{"service": svc, "caBundle": b64}}}}),
			want: TrustPath{Kind: "CustomResourceDefinition", Configuration: "widgets.example.com", Mapping: "app", Webhook: "conversion", FailurePolicy: "Fail",
				Service: &ServiceRef{Namespace: "app", Name: "conv", Port: 8443}, CABundle: []byte("ca")},
			wantOK: true,
		},
		"if a guarded APIService has a service without a port, its path is service on 443": {
			kind: policy.KindAPIService,
			obj: obj("APIService", "v1beta1.metrics.example.com", map[string]any{
				"service": map[string]any{"namespace": "app", "name": "metrics"}, "caBundle": b64}),
			want: TrustPath{Kind: "APIService", Configuration: "v1beta1.metrics.example.com", Mapping: "app", Webhook: "service", FailurePolicy: "Fail",
				Service: &ServiceRef{Namespace: "app", Name: "metrics", Port: 443}, CABundle: []byte("ca")},
			wantOK: true,
		},
		"if a guarded APIService skips TLS verification, there is nothing to probe": {
			kind: policy.KindAPIService,
			obj: obj("APIService", "v1beta1.metrics.example.com", map[string]any{
				"service": map[string]any{"namespace": "app", "name": "metrics"}, "insecureSkipTLSVerify": true}),
		},
		"if a guarded CRD has no conversion webhook, there is nothing to probe": {
			kind: policy.KindCRD,
			obj:  obj("CustomResourceDefinition", "widgets.example.com", map[string]any{"conversion": map[string]any{"strategy": "None"}}),
		},
		"if no mapping claims the CRD, there is nothing to probe": {
			kind: policy.KindCRD,
			obj: obj("CustomResourceDefinition", "gadgets.example.com", map[string]any{"conversion": map[string]any{
				"strategy": "Webhook", "webhook": map[string]any{"clientConfig": map[string]any{"service": svc}}}}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := TrustObjectPath(cfg, tc.kind, tc.obj)
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

type staticConfig struct{ cfg *policy.Mappings }

func (s staticConfig) Current() *policy.Mappings { return s.cfg }

func Test_Runner_Round(t *testing.T) {
	ca := testpki.MustCA(t, "webhook-ca")
	leaf, err := ca.Issue("webhook")
	require.NoError(t, err)
	url := "https://" + serveTLS(t, leaf)
	entry := func(name string, bundle []byte) admv1.ValidatingWebhook {
		return admv1.ValidatingWebhook{Name: name, ClientConfig: admv1.WebhookClientConfig{URL: &url, CABundle: bundle}}
	}
	other := testpki.MustCA(t, "other-ca")
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		&admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
			Webhooks: []admv1.ValidatingWebhook{entry("good.example.com", ca.PEM), entry("bad.example.com", other.PEM)}},
		&admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "unguarded"},
			Webhooks: []admv1.ValidatingWebhook{entry("bad.example.com", other.PEM)}},
	).Build()
	m := metrics.NewProbe(prometheus.NewRegistry())
	r := &Runner{Config: staticConfig{guardedConfig(t)}, Cached: c, Direct: c, Prober: &Prober{},
		Reporter: &Reporter{Metrics: m}, Log: logr.Discard()}

	got := r.Round(t.Context())
	reasons := map[string]Reason{}
	for _, res := range got {
		reasons[res.Path.Configuration+"/"+res.Path.Webhook] = res.Reason
	}
	require.Equal(t, map[string]Reason{"guarded/bad.example.com": ReasonUnknownAuthority, "guarded/good.example.com": ReasonNone}, reasons,
		"only the guarded configuration's entries are probed (the fake lists no CRDs or APIServices)")
	require.Equal(t, 2, testutil.CollectAndCount(m.Verified))
	require.Equal(t, 0.0, testutil.ToFloat64(m.Verified.WithLabelValues("ValidatingWebhookConfiguration", "guarded", "bad.example.com")))
}
