package observe

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// crdObject is a CRD named name with a large schema, labels and a
// last-applied annotation; conversion is its spec.conversion (nil: none).
func crdObject(name string, conversion map[string]any) *unstructured.Unstructured {
	spec := map[string]any{
		"group": "example.com",
		"names": map[string]any{"plural": "widgets", "kind": "Widget"},
		"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "description": strings.Repeat("x", 100_000)}}}},
	}
	if conversion != nil {
		spec["conversion"] = conversion
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name, "uid": "uid-" + name, "resourceVersion": "3",
			"labels": map[string]any{"team": "a"}, "annotations": map[string]any{lastApplied: strings.Repeat("y", 1000)}},
		"spec": spec,
	}}
}

// webhookConversion is a CRD's spec.conversion calling clientConfig.
func webhookConversion(clientConfig map[string]any) map[string]any {
	return map[string]any{"strategy": "Webhook", "webhook": map[string]any{
		"conversionReviewVersions": []any{"v1"}, "clientConfig": clientConfig}}
}

// apiServiceObject is an APIService named name; spec is its spec.
func apiServiceObject(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name, "uid": "uid-" + name, "resourceVersion": "4", "labels": map[string]any{"team": "a"}},
		"spec":     spec,
	}}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// row is kind's row of guardapi.Kinds.
func row(tb testing.TB, kind policy.GuardedKind) guardapi.KindInfo {
	tb.Helper()
	info, ok := kind.Info()
	require.True(tb, ok, "%s has no row", kind)
	return info
}

// The resources the tests' dynamic clients serve.
var crdResource, apiServiceResource = func() (schema.GroupVersionResource, schema.GroupVersionResource) {
	crd, _ := guardapi.KindInfoOf(guardapi.KindCustomResourceDefinition)
	api, _ := guardapi.KindInfoOf(guardapi.KindAPIService)
	return resourceOf(crd), resourceOf(api)
}()

func Test_trimTrust(t *testing.T) {
	ca := testpki.MustCA(t, "ca").PEM
	svc := map[string]any{"namespace": "app", "name": "conv", "port": int64(443), "path": "/convert"}
	meta := func(name, rv string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv}
	}
	const crdName, apiName = "widgets.example.com", "v1beta1.metrics.example.com"
	for name, tc := range map[string]struct {
		kind policy.GuardedKind
		obj  any
		want any
	}{
		"if a CRD converts by webhook through a Service, its name, Service and caBundle are kept, its schema, labels and annotations dropped": {
			kind: policy.KindCRD,
			obj:  crdObject(crdName, webhookConversion(map[string]any{"service": svc, "caBundle": b64(ca)})),
			want: &trustObject{ObjectMeta: meta(crdName, "3"), TrustKind: policy.KindCRD, HasEntry: true,
				Service: &admv1.ServiceReference{Namespace: "app", Name: "conv"}, CABundle: ca},
		},
		"if a CRD's conversion webhook is called by URL, it has an entry without a Service": {
			kind: policy.KindCRD,
			obj:  crdObject(crdName, webhookConversion(map[string]any{"url": "https://conv.example.com", "caBundle": b64(ca)})),
			want: &trustObject{ObjectMeta: meta(crdName, "3"), TrustKind: policy.KindCRD, HasEntry: true, CABundle: ca},
		},
		"if a CRD's conversion webhook has no caBundle, its entry has none": {
			kind: policy.KindCRD,
			obj:  crdObject(crdName, webhookConversion(map[string]any{"service": svc})),
			want: &trustObject{ObjectMeta: meta(crdName, "3"), TrustKind: policy.KindCRD, HasEntry: true,
				Service: &admv1.ServiceReference{Namespace: "app", Name: "conv"}},
		},
		"if a CRD's conversion strategy is None, it has no entry": {
			kind: policy.KindCRD,
			obj:  crdObject(crdName, map[string]any{"strategy": "None"}),
			want: &trustObject{ObjectMeta: meta(crdName, "3"), TrustKind: policy.KindCRD},
		},
		"if a CRD has no conversion, it has no entry": {
			kind: policy.KindCRD,
			obj:  crdObject(crdName, nil),
			want: &trustObject{ObjectMeta: meta(crdName, "3"), TrustKind: policy.KindCRD},
		},
		"if a caBundle is not base64, it is kept as it is": {
			kind: policy.KindCRD,
			obj:  crdObject(crdName, webhookConversion(map[string]any{"service": svc, "caBundle": "not base64!"})),
			want: &trustObject{ObjectMeta: meta(crdName, "3"), TrustKind: policy.KindCRD, HasEntry: true,
				Service: &admv1.ServiceReference{Namespace: "app", Name: "conv"}, CABundle: []byte("not base64!")},
		},
		"if an APIService has a service, its name, Service and caBundle are kept, its labels and priorities dropped": {
			kind: policy.KindAPIService,
			obj: apiServiceObject(apiName, map[string]any{"group": "metrics.example.com", "version": "v1beta1",
				"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
				"service": map[string]any{"namespace": "kube-system", "name": "metrics", "port": int64(443)}, "caBundle": b64(ca)}),
			want: &trustObject{ObjectMeta: meta(apiName, "4"), TrustKind: policy.KindAPIService, HasEntry: true,
				Service: &admv1.ServiceReference{Namespace: "kube-system", Name: "metrics"}, CABundle: ca},
		},
		"if an APIService skips TLS verification, its entry has no caBundle": {
			kind: policy.KindAPIService,
			obj: apiServiceObject(apiName, map[string]any{"insecureSkipTLSVerify": true,
				"service": map[string]any{"namespace": "kube-system", "name": "metrics"}}),
			want: &trustObject{ObjectMeta: meta(apiName, "4"), TrustKind: policy.KindAPIService, HasEntry: true,
				Service: &admv1.ServiceReference{Namespace: "kube-system", Name: "metrics"}},
		},
		"if an APIService is local (served by kube-apiserver), it has no entry": {
			kind: policy.KindAPIService,
			obj:  apiServiceObject("v1.apps", map[string]any{"group": "apps", "version": "v1", "groupPriorityMinimum": int64(17800)}),
			want: &trustObject{ObjectMeta: meta("v1.apps", "4"), TrustKind: policy.KindAPIService},
		},
		"if the object is not unstructured (a tombstone), it passes as it is": {
			kind: policy.KindCRD,
			obj:  toolscache.DeletedFinalStateUnknown{Key: crdName},
			want: toolscache.DeletedFinalStateUnknown{Key: crdName},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := trimTrust(row(t, tc.kind))(tc.obj)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			if trimmed, ok := got.(*trustObject); ok {
				assert.Equal(t, trimmed, trimmed.DeepCopyObject())
			}
		})
	}
}

// trustConfig is a GuardConfig whose mapping "conv" owns the CRD
// widgets.example.com and the APIService v1beta1.metrics.example.com.
func trustConfig(t *testing.T) *policy.Mappings {
	t.Helper()
	cfg, err := policy.Load([]byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
- name: conv
  match:
    customResourceDefinitions: [widgets.example.com]
    apiServices: [v1beta1.metrics.example.com]
  writers: {serviceAccounts: [app/controller]}
  ca:
    pem: |
` + testpki.Indent(string(testpki.MustCA(t, "owner-ca").PEM), 6) + "\n"))
	require.NoError(t, err)
	return cfg
}

func Test_healthSource_trustObjects(t *testing.T) {
	notAfter := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	ca := testpki.MustCA(t, "ca", testpki.WithValidity(notAfter.Add(-time.Hour*24*365), notAfter))
	fps, err := cabundle.Parse(ca.PEM)
	require.NoError(t, err)
	fp, expiry := fps[0].Short(), fmt.Sprint(float64(notAfter.Unix()))
	yes := true
	svc := map[string]any{"namespace": "app", "name": "conv"}
	for name, tc := range map[string]struct {
		kind policy.GuardedKind
		obj  *unstructured.Unstructured
		want []string
	}{
		"if a mapped CRD converts through a Service, its entry conversion fails closed, has no timeout and counts the Service's endpoints": {
			kind: policy.KindCRD,
			obj:  crdObject("widgets.example.com", webhookConversion(map[string]any{"service": svc, "caBundle": b64(ca.PEM)})),
			want: []string{
				`webhook_guard_webhook_cabundle_expiry_timestamp_seconds{configuration="widgets.example.com",kind="CustomResourceDefinition",webhook="conversion"} ` + expiry,
				`webhook_guard_webhook_info{ca_fingerprint="` + fp + `",configuration="widgets.example.com",failure_policy="Fail",kind="CustomResourceDefinition",mapping="conv",timeout_seconds="",webhook="conversion"} 1`,
				`webhook_guard_webhook_service_ready_endpoints{configuration="widgets.example.com",kind="CustomResourceDefinition",service_name="conv",service_namespace="app",webhook="conversion"} 1`,
			},
		},
		"if an unmapped CRD converts by URL with an unusable caBundle, it is invalid, without expiry or endpoints": {
			kind: policy.KindCRD,
			obj:  crdObject("gadgets.example.com", webhookConversion(map[string]any{"url": "https://conv.example.com", "caBundle": b64([]byte("not PEM"))})),
			want: []string{
				`webhook_guard_webhook_info{ca_fingerprint="invalid",configuration="gadgets.example.com",failure_policy="Fail",kind="CustomResourceDefinition",mapping="",timeout_seconds="",webhook="conversion"} 1`,
			},
		},
		"if a CRD has no conversion webhook, it has no series": {
			kind: policy.KindCRD,
			obj:  crdObject("widgets.example.com", map[string]any{"strategy": "None"}),
		},
		"if a mapped APIService has a service, its entry service fails closed, has no timeout and counts the Service's endpoints": {
			kind: policy.KindAPIService,
			obj:  apiServiceObject("v1beta1.metrics.example.com", map[string]any{"service": svc, "caBundle": b64(ca.PEM)}),
			want: []string{
				`webhook_guard_webhook_cabundle_expiry_timestamp_seconds{configuration="v1beta1.metrics.example.com",kind="APIService",webhook="service"} ` + expiry,
				`webhook_guard_webhook_info{ca_fingerprint="` + fp + `",configuration="v1beta1.metrics.example.com",failure_policy="Fail",kind="APIService",mapping="conv",timeout_seconds="",webhook="service"} 1`,
				`webhook_guard_webhook_service_ready_endpoints{configuration="v1beta1.metrics.example.com",kind="APIService",service_name="conv",service_namespace="app",webhook="service"} 1`,
			},
		},
		"if an APIService skips TLS verification, its fingerprint is empty and it has no expiry": {
			kind: policy.KindAPIService,
			obj:  apiServiceObject("v1beta1.other.example.com", map[string]any{"service": svc, "insecureSkipTLSVerify": true}),
			want: []string{
				`webhook_guard_webhook_info{ca_fingerprint="",configuration="v1beta1.other.example.com",failure_policy="Fail",kind="APIService",mapping="",timeout_seconds="",webhook="service"} 1`,
				`webhook_guard_webhook_service_ready_endpoints{configuration="v1beta1.other.example.com",kind="APIService",service_name="conv",service_namespace="app",webhook="service"} 1`,
			},
		},
		"if an APIService is local, it has no series": {
			kind: policy.KindAPIService,
			obj:  apiServiceObject("v1.apps", map[string]any{"group": "apps", "version": "v1"}),
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
			trimmed, err := trimTrust(row(t, tc.kind))(tc.obj)
			require.NoError(t, err)
			require.NoError(t, store.Add(trimmed))
			slices := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{byService: serviceIndex})
			require.NoError(t, slices.Add(trimSlice(slice("app", "conv-1", "conv", &yes))))
			endpoints := readyEndpoints{slices: slices, synced: func() bool { return true }}
			reg := prometheus.NewRegistry()
			NewMetrics(reg).Health.SetSource(healthSource(staticConfig{trustConfig(t)}, endpoints.count, store))
			assert.Equal(t, tc.want, healthSeries(t, reg))
		})
	}
}

// trustClient is a fake dynamic client serving every kind whose objects
// hold one entry (CRDs and APIServices), as the observer watches them.
func trustClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), trustListKinds(), objs...)
}

// trustListKinds are the list kinds of the kinds whose objects hold one
// entry, by resource.
func trustListKinds() map[schema.GroupVersionResource]string {
	out := map[schema.GroupVersionResource]string{}
	for _, k := range guardapi.Kinds {
		if k.Entries.One() {
			out[resourceOf(k)] = k.Kind + "List"
		}
	}
	return out
}

func Test_Observer_trustObjects(t *testing.T) {
	ca := testpki.MustCA(t, "ca")
	crd := crdObject("widgets.example.com", webhookConversion(map[string]any{"url": "https://conv.example.com", "caBundle": b64(ca.PEM)}))
	api := apiServiceObject("v1beta1.metrics.example.com", map[string]any{"service": map[string]any{"namespace": "app", "name": "metrics"}, "caBundle": b64(ca.PEM)})
	const crdInfo, apiInfo = `webhook_guard_webhook_info{ca_fingerprint=`, `kind="APIService"`
	count := func(series []string, substr string) int {
		n := 0
		for _, s := range series {
			if strings.Contains(s, substr) {
				n++
			}
		}
		return n
	}

	t.Run("the leader exports CRDs and APIServices beside the webhook configurations", func(t *testing.T) {
		dyn := trustClient(crd, api)
		reg := startObserver(t, fake.NewClientset(), func(o *Observer) { o.Dynamic = dyn })
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			series := healthSeries(t, reg)
			assert.Equal(c, 1, count(series, `kind="CustomResourceDefinition"`+`,mapping="",timeout_seconds="",webhook="conversion"} 1`), series)
			assert.Equal(c, 3, count(series, apiInfo), series)
			assert.Contains(c, series, `webhook_guard_webhook_service_ready_endpoints{configuration="v1beta1.metrics.example.com",kind="APIService",service_name="metrics",service_namespace="app",webhook="service"} 0`,
				"a Service without slices has no ready endpoint")
		}, 10*time.Second, 10*time.Millisecond)
		require.NoError(t, dyn.Resource(crdResource).Delete(t.Context(), crd.GetName(), metav1.DeleteOptions{}))
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Zero(c, count(healthSeries(t, reg), `kind="CustomResourceDefinition"`))
		}, 10*time.Second, 10*time.Millisecond, "a deleted CRD leaves no series")
	})

	t.Run("if the guard may not list APIServices, the other kinds are exported", func(t *testing.T) {
		dyn := trustClient(crd, api)
		dyn.PrependReactor("list", "apiservices", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: apiServiceResource.Group, Resource: apiServiceResource.Resource}, "", nil)
		})
		client := fake.NewClientset(&admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
			Webhooks: []admv1.ValidatingWebhook{{Name: "a.example.io", ClientConfig: admv1.WebhookClientConfig{CABundle: ca.PEM}}}})
		reg := startObserver(t, client, func(o *Observer) { o.Dynamic = dyn })
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			series := healthSeries(t, reg)
			assert.Equal(c, 2, count(series, `kind="CustomResourceDefinition"`), series)
			assert.Equal(c, 2, count(series, `kind="ValidatingWebhookConfiguration"`), series)
		}, 10*time.Second, 10*time.Millisecond)
		assert.Zero(t, count(healthSeries(t, reg), apiInfo))
		assert.NotZero(t, count(healthSeries(t, reg), crdInfo))
	})
}
