package discover

import (
	"context"
	"encoding/base64"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// TrustScheme is the guard's scheme with the CRD types, as the command
// line's client has it.
func trustScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	require.NoError(t, apiextv1.AddToScheme(scheme))
	return scheme
}

// conversionCRD is a CRD whose conversion webhook calls Service ns/svc.
func conversionCRD(name, ns, svc string, bundle []byte) *apiextv1.CustomResourceDefinition {
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextv1.CustomResourceDefinitionSpec{Group: "example.com", Conversion: &apiextv1.CustomResourceConversion{
			Strategy: apiextv1.WebhookConverter,
			Webhook: &apiextv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}, ClientConfig: &apiextv1.WebhookClientConfig{
				Service:  &apiextv1.ServiceReference{Namespace: ns, Name: svc, Path: new("/convert"), Port: new(int32(9443))},
				CABundle: bundle,
			}},
		}},
	}
}

// apiService is an APIService of the group for Service ns/svc (none when
// svc is empty: a local APIService).
func apiService(name, group, ns, svc string, bundle []byte, insecure bool) *unstructured.Unstructured {
	spec := map[string]any{"group": group, "version": "v1beta1", "groupPriorityMinimum": int64(100), "versionPriority": int64(10)}
	if svc != "" {
		spec["service"] = map[string]any{"namespace": ns, "name": svc, "port": int64(443)}
	}
	if len(bundle) > 0 {
		spec["caBundle"] = base64.StdEncoding.EncodeToString(bundle)
	}
	if insecure {
		spec["insecureSkipTLSVerify"] = true
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("apiregistration.k8s.io/v1")
	u.SetKind("APIService")
	u.SetName(name)
	return u
}

func Test_ListTrustObjects(t *testing.T) {
	ca := testpki.MustCA(t, "conversion-ca")
	tests := map[string]struct {
		objects []client.Object
		// forbidden lists the kinds whose list the caller may not make.
		forbidden  []string
		want       []Configuration
		unreadable []policy.GuardedKind
	}{
		"a CRD's conversion webhook and an APIService's service are read with their caBundle's field managers": {
			objects: []client.Object{
				conversionCRD("widgets.example.com", "app", "conv", ca.PEM),
				apiService("v1beta1.metrics.example.com", "metrics.example.com", "app", "metrics", ca.PEM, false),
			},
			want: []Configuration{
				{Kind: policy.KindCRD, Name: "widgets.example.com", Group: "example.com", CABundleManagers: []string{},
					Webhooks: []Webhook{{Name: policy.EntryConversion, Service: &ServiceRef{Namespace: "app", Name: "conv"}, CABundle: ca.PEM, FailurePolicy: ptr.To(admv1.Fail)}}},
				{Kind: policy.KindAPIService, Name: "v1beta1.metrics.example.com", Group: "metrics.example.com", CABundleManagers: []string{},
					Webhooks: []Webhook{{Name: policy.EntryService, Service: &ServiceRef{Namespace: "app", Name: "metrics"}, CABundle: ca.PEM, FailurePolicy: ptr.To(admv1.Fail)}}},
			},
		},
		"a CRD without a conversion webhook and a local APIService trust no caBundle and are left out": {
			objects: []client.Object{
				&apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "plain.example.com"}, Spec: apiextv1.CustomResourceDefinitionSpec{Group: "example.com"}},
				apiService("v1.apps", "apps", "", "", nil, false),
			},
		},
		"a kind the caller may not list is left out, not an error": {
			objects:    []client.Object{conversionCRD("widgets.example.com", "app", "conv", nil)},
			forbidden:  []string{"CustomResourceDefinitionList", "APIServiceList"},
			unreadable: []policy.GuardedKind{policy.KindCRD, policy.KindAPIService},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(trustScheme(t)).WithObjects(tc.objects...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					gvk := list.GetObjectKind().GroupVersionKind()
					for _, k := range tc.forbidden {
						if gvk.Kind == k {
							return apierrors.NewForbidden(schema.GroupResource{Group: gvk.Group, Resource: k}, "", nil)
						}
					}
					return c.List(ctx, list, opts...)
				},
			}).Build()
			objs, unreadable, err := ListTrustObjects(t.Context(), c)
			require.NoError(t, err)
			var got []Configuration
			for _, o := range objs {
				got = append(got, trustConfiguration(o))
			}
			assert.Equal(t, tc.want, got)
			var kinds []policy.GuardedKind
			for _, k := range []policy.GuardedKind{policy.KindCRD, policy.KindAPIService} {
				if unreadable[k] != "" {
					kinds = append(kinds, k)
				}
			}
			assert.Equal(t, tc.unreadable, kinds)
		})
	}
}

// Test_trustConfiguration: the caBundle's field managers are read at the
// kind's own path, and both kinds' entries fail as failurePolicy Fail.
func Test_trustConfiguration(t *testing.T) {
	managed := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	svc := &admv1.ServiceReference{Namespace: "app", Name: "conv"}
	tests := map[string]struct {
		obj  TrustObject
		want Configuration
	}{
		"a CRD's caBundle managers are those of spec.conversion.webhook.clientConfig.caBundle": {
			obj: TrustObject{Kind: policy.KindCRD, Group: "example.com", ClientConfig: admv1.WebhookClientConfig{Service: svc}, Meta: metav1.ObjectMeta{
				Name: "widgets.example.com", ManagedFields: []metav1.ManagedFieldsEntry{
					managed(CAInjectorFieldManager, `{"f:spec":{"f:conversion":{"f:webhook":{"f:clientConfig":{"f:caBundle":{}}}}}}`),
					managed("helm", `{"f:spec":{"f:group":{},"f:conversion":{"f:strategy":{}}}}`),
				}}},
			want: Configuration{Kind: policy.KindCRD, Name: "widgets.example.com", Group: "example.com", CABundleManagers: []string{CAInjectorFieldManager},
				Webhooks: []Webhook{{Name: policy.EntryConversion, Service: &ServiceRef{Namespace: "app", Name: "conv"}, FailurePolicy: ptr.To(admv1.Fail)}}},
		},
		"an APIService's caBundle managers are those of spec.caBundle": {
			obj: TrustObject{Kind: policy.KindAPIService, ClientConfig: admv1.WebhookClientConfig{Service: svc}, Meta: metav1.ObjectMeta{
				Name: "v1.metrics.example.com", ManagedFields: []metav1.ManagedFieldsEntry{
					managed("operator", `{"f:spec":{"f:caBundle":{}}}`),
					managed("olm", `{"f:spec":{"f:caBundle":{}}}`),
					managed("helm", `{"f:spec":{"f:service":{}}}`),
				}}},
			want: Configuration{Kind: policy.KindAPIService, Name: "v1.metrics.example.com", CABundleManagers: []string{"olm", "operator"},
				Webhooks: []Webhook{{Name: policy.EntryService, Service: &ServiceRef{Namespace: "app", Name: "conv"}, FailurePolicy: ptr.To(admv1.Fail)}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, trustConfiguration(tc.obj))
		})
	}
}

// Test_Propose_trustObjects: CRDs and APIServices are proposed in the
// mapping of their writer and CA, under their own match fields, with
// evidence that names their own entry.
func Test_Propose_trustObjects(t *testing.T) {
	koordCA := testpki.MustCA(t, "koord-ca")
	injected := map[string]string{cmapi.WantInjectAnnotation: "app/serving"}
	crd := svcConfig(policy.KindCRD, "recommendations.koordinator.sh", "koordinator-system", "koordinator-webhook-service", koordCA.PEM)
	crd.Webhooks[0].Name = policy.EntryConversion
	apiSvc := svcConfig(policy.KindAPIService, "v1beta1.metrics.koordinator.sh", "koordinator-system", "koordinator-webhook-service", koordCA.PEM)
	apiSvc.Webhooks[0].Name = policy.EntryService
	tests := map[string]struct {
		configs []Configuration
		want    guardapi.Match
		// evidence is a line the mapping's evidence must hold.
		evidence string
	}{
		"a CRD and an APIService behind the workload's Service join its mapping": {
			configs: []Configuration{
				svcConfig(policy.KindValidating, "koordinator-validating", "koordinator-system", "koordinator-webhook-service", koordCA.PEM),
				crd, apiSvc,
			},
			want: guardapi.Match{Validating: []string{"koordinator-validating"}, CustomResourceDefinitions: []string{crd.Name}, APIServices: []string{apiSvc.Name}},
			evidence: "CustomResourceDefinition/recommendations.koordinator.sh: the conversion webhook calls Service koordinator-system/koordinator-webhook-service, " +
				"which selects Deployment koordinator-system/koord-manager (service account koord-manager)",
		},
		"injected objects without a workload share the injected mapping": {
			configs: []Configuration{
				{Kind: policy.KindCRD, Name: "widgets.example.com", Annotations: injected, Webhooks: []Webhook{{Name: policy.EntryConversion, URL: "https://127.0.0.1:9/convert"}}},
				{Kind: policy.KindAPIService, Name: "v1.metrics.example.com", Annotations: injected, Webhooks: []Webhook{{Name: policy.EntryService, Service: &ServiceRef{Namespace: "default", Name: "absent"}}}},
			},
			want:     guardapi.Match{CustomResourceDefinitions: []string{"widgets.example.com"}, APIServices: []string{"v1.metrics.example.com"}},
			evidence: "APIService/v1.metrics.example.com: the APIService calls Service default/absent, which does not exist",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := Propose(tc.configs, koordinator(koordCA))
			assert.Empty(t, p.Undecided)
			if assert.Len(t, p.Mappings, 1) {
				assert.Equal(t, tc.want, p.Mappings[0].Owner.Match)
				assert.Contains(t, p.Mappings[0].Evidence, tc.evidence)
			}
		})
	}
}
