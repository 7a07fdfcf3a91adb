package scan

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/discover"
	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// Test_Health_trustObjects: a CRD's conversion webhook and an APIService
// fail as failurePolicy Fail when their Service has no ready endpoint, each
// saying what fails, at its own field; the admission-only checks skip them.
func Test_Health_trustObjects(t *testing.T) {
	svc := &discover.ServiceRef{Namespace: "app", Name: "metrics"}
	entry := func(name string) discover.Webhook {
		return discover.Webhook{Name: name, Service: svc, FailurePolicy: ptr.To(admv1.Fail)}
	}
	ready := discover.Cluster{Services: map[string]discover.Service{"app/metrics": {Namespace: "app", Name: "metrics", ReadyEndpoints: 1}}}
	tests := map[string]struct {
		cfg     discover.Configuration
		cluster discover.Cluster
		want    []Finding
	}{
		"if an APIService's Service does not exist, fail on spec.service: its whole API group fails": {
			cfg: discover.Configuration{Kind: policy.KindAPIService, Name: "v1beta1.metrics.example.com", Group: "metrics.example.com", Webhooks: []discover.Webhook{entry(policy.EntryService)}},
			want: []Finding{{Level: LevelFail, Check: CheckNoEndpoints, Configuration: "APIService/v1beta1.metrics.example.com", Webhook: policy.EntryService, Field: "spec.service",
				Detail:     "Service app/metrics does not exist: the APIService is unavailable, and with it the whole API group metrics.example.com fails: discovery and every request of it",
				Suggestion: "run the server's pods behind Service app/metrics, or delete the APIService while nothing serves it"}},
		},
		"if a CRD's conversion webhook's Service has no ready endpoints, fail on its clientConfig.service": {
			cfg:     discover.Configuration{Kind: policy.KindCRD, Name: "widgets.example.com", Group: "example.com", Webhooks: []discover.Webhook{entry(policy.EntryConversion)}},
			cluster: discover.Cluster{Services: map[string]discover.Service{"app/metrics": {Namespace: "app", Name: "metrics"}}},
			want: []Finding{{Level: LevelFail, Check: CheckNoEndpoints, Configuration: "CustomResourceDefinition/widgets.example.com", Webhook: policy.EntryConversion,
				Field:      "spec.conversion.webhook.clientConfig.service",
				Detail:     "Service app/metrics has no ready endpoints: kube-apiserver cannot convert widgets.example.com between versions: every read or write in a version other than the stored one fails",
				Suggestion: "run the conversion webhook's pods behind Service app/metrics"}},
		},
		"if an APIService's caBundle has two field managers, warn on spec.caBundle": {
			cfg:     discover.Configuration{Kind: policy.KindAPIService, Name: "v1.metrics.example.com", CABundleManagers: []string{"olm", "operator"}, Webhooks: []discover.Webhook{entry(policy.EntryService)}},
			cluster: ready,
			want: []Finding{{Level: LevelWarn, Check: CheckCAWriters, Configuration: "APIService/v1.metrics.example.com", Field: "spec.caBundle",
				Detail:     "2 field managers own caBundle fields: olm, operator",
				Suggestion: "keep one CA writer: every other manager is a second CA writer fighting the owner (map the owner and run the guard to see who writes)"}},
		},
		"if the entry had admission settings, the admission-only checks would still skip it": {
			cfg: discover.Configuration{Kind: policy.KindCRD, Name: "widgets.example.com", Webhooks: []discover.Webhook{{Name: policy.EntryConversion, Service: svc,
				FailurePolicy: ptr.To(admv1.Fail), TimeoutSeconds: ptr.To[int32](30), SideEffects: ptr.To(admv1.SideEffectClassUnknown),
				Rules: []admv1.RuleWithOperations{{Rule: admv1.Rule{Resources: []string{"pods"}}}}}}},
			cluster: ready,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Health([]discover.Configuration{tc.cfg}, tc.cluster, Options{Now: time.Now(), ExpiryThreshold: time.Hour})
			assert.Equal(t, tc.want, got)
		})
	}
}

// trustObject is a CRD or an APIService written as a manifest: the CRD's
// conversion webhook calls an address nothing listens on, the APIService's
// Service app/metrics does not exist. bundle fills {{bundle}}.
func trustObject(t *testing.T, manifest string, bundle []byte) client.Object {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(strings.ReplaceAll(manifest, "{{bundle}}", base64.StdEncoding.EncodeToString(bundle))), &u.Object))
	return u
}

const (
	widgetsCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {url: "https://127.0.0.1:9/convert", caBundle: "{{bundle}}"}`
	metricsAPIService = `
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.metrics.example.com}
spec: {group: metrics.example.com, version: v1, service: {namespace: app, name: metrics, port: 443}, caBundle: "{{bundle}}"}`
)

// Test_scanMappings_trustObjects: the mapping checks of the CRDs and
// APIServices a mapping names (insecureSkipTLSVerify at its own field, the
// caBundle's checks by entry as for webhooks[]); a named object that
// does not exist is missing, and one of a kind scan may not list is not
// reported missing but unknown.
func Test_scanMappings_trustObjects(t *testing.T) {
	ownerCA := testpki.MustCA(t, "owner-ca")
	foreignCA := testpki.MustCA(t, "foreign-ca")
	mapping := func(t *testing.T, crds, apiServices []string) *policy.Mappings {
		b, err := yaml.Marshal(&guardapi.GuardConfig{TypeMeta: metav1.TypeMeta{APIVersion: guardapi.APIVersion, Kind: guardapi.Kind}, Owners: []guardapi.Owner{{
			Name: "metrics", Match: guardapi.Match{CustomResourceDefinitions: crds, APIServices: apiServices},
			Writers: guardapi.Subjects{ServiceAccounts: []string{"app/ctrl"}}, CA: guardapi.CASource{PEM: string(ownerCA.PEM)},
		}}})
		require.NoError(t, err)
		cfg, err := policy.Load(b)
		require.NoError(t, err)
		return cfg
	}
	// brief keeps the fields a test asserts.
	type brief struct {
		Level                       Level
		Check, Configuration, Field string
	}
	tests := map[string]struct {
		objects           []client.Object
		crds, apiServices []string
		forbidden         string
		want              []brief
	}{
		"a CRD and an APIService holding a foreign CA are ca-mismatch": {
			objects: []client.Object{trustObject(t, widgetsCRD, foreignCA.PEM), trustObject(t, metricsAPIService, foreignCA.PEM)},
			crds:    []string{"widgets.example.com"}, apiServices: []string{"v1.metrics.example.com"},
			want: []brief{
				{LevelFail, CheckCAMismatch, "CustomResourceDefinition/widgets.example.com", ""},
				{LevelFail, CheckCAMismatch, "APIService/v1.metrics.example.com", ""},
			},
		},
		"an empty caBundle is ca-empty, insecureSkipTLSVerify is ca-mismatch": {
			objects: []client.Object{trustObject(t, widgetsCRD, nil), trustObject(t, strings.Replace(metricsAPIService, "caBundle:", "insecureSkipTLSVerify: true, caBundle:", 1), ownerCA.PEM)},
			crds:    []string{"widgets.example.com"}, apiServices: []string{"v1.metrics.example.com"},
			want: []brief{
				{LevelWarn, CheckCAEmpty, "CustomResourceDefinition/widgets.example.com", ""},
				{LevelFail, CheckCAMismatch, "APIService/v1.metrics.example.com", "spec.insecureSkipTLSVerify"},
			},
		},
		"a named CRD that does not exist is missing; an unnamed one is not the mapping's": {
			objects: []client.Object{trustObject(t, strings.Replace(widgetsCRD, "widgets.", "gadgets.", 1), foreignCA.PEM)},
			crds:    []string{"widgets.example.com"},
			want: []brief{
				{LevelInfo, CheckUnmapped, "CustomResourceDefinition/gadgets.example.com", ""},
				{LevelWarn, CheckMissing, "CustomResourceDefinition/widgets.example.com", ""},
			},
		},
		"a named APIService scan may not list is not reported missing": {
			apiServices: []string{"v1.metrics.example.com"},
			forbidden:   "APIServiceList",
			want:        []brief{{LevelInfo, CheckMissing, "APIService/v1.metrics.example.com", ""}},
		},
	}
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objects...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if gvk := list.GetObjectKind().GroupVersionKind(); tc.forbidden != "" && gvk.Kind == tc.forbidden {
						return apierrors.NewForbidden(schema.GroupResource{Group: gvk.Group, Resource: "apiservices"}, "", nil)
					}
					return c.List(ctx, list, opts...)
				},
			}).Build()
			found, err := scanMappings(t.Context(), c, mapping(t, tc.crds, tc.apiServices), Options{Now: time.Now(), ExpiryThreshold: time.Hour, DialTimeout: 50 * time.Millisecond})
			require.NoError(t, err)
			var got []brief
			for _, f := range found {
				if f.Check != CheckServingCert { // the fake address is dialed and unreachable
					got = append(got, brief{f.Level, f.Check, f.Configuration, f.Field})
				}
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}
