package static

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// validInput is an input every test starts from and changes one field of.
func validInput(t testing.TB) Input {
	t.Helper()
	return Input{
		URL:            "https://127.0.0.1:9443/validate",
		CABundle:       testpki.MustCA(t, "webhook-guard-ca").PEM,
		FailurePolicy:  admv1.Fail,
		TimeoutSeconds: 5,
	}
}

// entry is what tells the entries of the static configuration apart; the
// fields every entry shares are checked by Test_ValidatingWebhookConfiguration_sharedFields.
type entry struct {
	Name            string
	FailurePolicy   admv1.FailurePolicyType
	Resources       []string
	ObjectSelector  *metav1.LabelSelector
	MatchConditions []admv1.MatchCondition
}

func entriesOf(vwc *admv1.ValidatingWebhookConfiguration) []entry {
	out := make([]entry, 0, len(vwc.Webhooks))
	for _, w := range vwc.Webhooks {
		var resources []string
		for _, r := range w.Rules {
			resources = append(resources, r.Resources...)
		}
		out = append(out, entry{
			Name:            w.Name,
			FailurePolicy:   *w.FailurePolicy,
			Resources:       resources,
			ObjectSelector:  w.ObjectSelector,
			MatchConditions: w.MatchConditions,
		})
	}
	return out
}

func Test_ValidatingWebhookConfiguration(t *testing.T) {
	breakGlass := guardapi.Subjects{Groups: []string{"system:masters"}, Users: []string{"admin"}}
	bgExpr, ok := vap.SubjectsExpression(breakGlass)
	require.True(t, ok)
	configurations := []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}
	trustObjects := []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations", "customresourcedefinitions", "apiservices"}
	policyObjects := []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}
	generated := &metav1.LabelSelector{MatchLabels: map[string]string{vap.LabelManagedBy: vap.ManagedBy}}
	notTheGuard := admv1.MatchCondition{Name: "not-the-guard", Expression: `request.userInfo.username != "system:serviceaccount:webhook-guard:webhook-guard"`}
	notBreakGlass := admv1.MatchCondition{Name: "not-break-glass", Expression: "!(" + bgExpr + ")"}
	namedTrustObjects := admv1.MatchCondition{Name: "named-trust-objects", Expression: `request.resource.group == "admissionregistration.k8s.io" || ` +
		`(request.resource.resource == "customresourcedefinitions" && ` + vap.RequestName + ` in ["gadgets.example.com","widgets.example.com"]) || ` +
		`(request.resource.resource == "apiservices" && ` + vap.RequestName + ` in ["v1beta1.metrics.example.com"])`}

	tests := map[string]struct {
		change func(*Input)
		exp    []entry
	}{
		"if there are no break-glass subjects, generate the enforcing entry alone, without matchConditions": {
			change: func(*Input) {},
			exp:    []entry{{Name: WebhookName, FailurePolicy: admv1.Fail, Resources: configurations}},
		},
		"if the failure policy is Ignore, the enforcing entry fails open": {
			change: func(in *Input) { in.FailurePolicy = admv1.Ignore },
			exp:    []entry{{Name: WebhookName, FailurePolicy: admv1.Ignore, Resources: configurations}},
		},
		"if there are break-glass subjects, exclude them from the enforcing entry and send them to a fail-open entry": {
			change: func(in *Input) { in.BreakGlass = breakGlass },
			exp: []entry{
				{Name: WebhookName, FailurePolicy: admv1.Fail, Resources: configurations, MatchConditions: []admv1.MatchCondition{notBreakGlass}},
				{Name: BreakGlassWebhookName, FailurePolicy: admv1.Ignore, Resources: configurations, MatchConditions: []admv1.MatchCondition{{Name: "break-glass", Expression: bgExpr}}},
			},
		},
		"if the guard's service account is given, send writes of the generated policies by anyone else and break-glass to the guard": {
			change: func(in *Input) { in.BreakGlass, in.GuardServiceAccount = breakGlass, "webhook-guard/webhook-guard" },
			exp: []entry{
				{Name: WebhookName, FailurePolicy: admv1.Fail, Resources: configurations, MatchConditions: []admv1.MatchCondition{notBreakGlass}},
				{Name: BreakGlassWebhookName, FailurePolicy: admv1.Ignore, Resources: configurations, MatchConditions: []admv1.MatchCondition{{Name: "break-glass", Expression: bgExpr}}},
				{Name: PolicyObjectsWebhookName, FailurePolicy: admv1.Fail, Resources: policyObjects, ObjectSelector: generated, MatchConditions: []admv1.MatchCondition{notTheGuard, notBreakGlass}},
			},
		},
		"if the mappings name CRDs and APIServices, the enforcing and break-glass entries receive writes of those objects alone": {
			change: func(in *Input) {
				in.BreakGlass = breakGlass
				in.TrustObjects = map[string][]string{
					guardapi.KindCustomResourceDefinition: {"widgets.example.com", "gadgets.example.com"},
					guardapi.KindAPIService:               {"v1beta1.metrics.example.com"},
				}
			},
			exp: []entry{
				{Name: WebhookName, FailurePolicy: admv1.Fail, Resources: trustObjects, MatchConditions: []admv1.MatchCondition{namedTrustObjects, notBreakGlass}},
				{Name: BreakGlassWebhookName, FailurePolicy: admv1.Ignore, Resources: trustObjects, MatchConditions: []admv1.MatchCondition{namedTrustObjects, {Name: "break-glass", Expression: bgExpr}}},
			},
		},
		"if the guard's service account is given without break-glass subjects, skip only the guard's own writes of the generated policies": {
			change: func(in *Input) { in.GuardServiceAccount = "webhook-guard/webhook-guard" },
			exp: []entry{
				{Name: WebhookName, FailurePolicy: admv1.Fail, Resources: configurations},
				{Name: PolicyObjectsWebhookName, FailurePolicy: admv1.Fail, Resources: policyObjects, ObjectSelector: generated, MatchConditions: []admv1.MatchCondition{notTheGuard}},
			},
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			in := validInput(t)
			test.change(&in)
			vwc, err := ValidatingWebhookConfiguration(in)
			require.NoError(t, err)
			assert.Equal(t, ConfigName, vwc.Name)
			assert.Equal(t, test.exp, entriesOf(vwc))
		})
	}
}

// Test_ValidatingWebhookConfiguration_sharedFields: every entry calls the
// same guard the same way; only what it receives and how it fails differ.
func Test_ValidatingWebhookConfiguration_sharedFields(t *testing.T) {
	in := validInput(t)
	in.BreakGlass = guardapi.Subjects{Groups: []string{"system:masters"}}
	in.GuardServiceAccount = "webhook-guard/webhook-guard"
	vwc, err := ValidatingWebhookConfiguration(in)
	require.NoError(t, err)
	assert.Equal(t, metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"}, vwc.TypeMeta)
	require.Len(t, vwc.Webhooks, 3)
	for _, w := range vwc.Webhooks {
		assert.Equal(t, []string{"v1"}, w.AdmissionReviewVersions, w.Name)
		assert.Equal(t, admv1.WebhookClientConfig{URL: &in.URL, CABundle: in.CABundle}, w.ClientConfig, w.Name)
		assert.Equal(t, admv1.Equivalent, *w.MatchPolicy, w.Name)
		// Dry runs are decided but not recorded: the guard's records are its
		// only side effect.
		assert.Equal(t, admv1.SideEffectClassNoneOnDryRun, *w.SideEffects, w.Name)
		assert.Equal(t, int32(5), *w.TimeoutSeconds, w.Name)
		require.Len(t, w.Rules, 1, w.Name)
		assert.Equal(t, []admv1.OperationType{admv1.Create, admv1.Update, admv1.Delete}, w.Rules[0].Operations, w.Name)
		assert.Equal(t, []string{"admissionregistration.k8s.io"}, w.Rules[0].APIGroups, w.Name)
		assert.Equal(t, []string{"v1"}, w.Rules[0].APIVersions, w.Name)
		assert.Equal(t, admv1.ClusterScope, *w.Rules[0].Scope, w.Name)
	}

	// The entries start from copies, not from one another.
	*vwc.Webhooks[0].FailurePolicy = admv1.Ignore
	assert.Equal(t, admv1.Fail, *vwc.Webhooks[2].FailurePolicy)
}

func Test_ValidatingWebhookConfiguration_invalid(t *testing.T) {
	tests := map[string]struct {
		change func(*Input)
		exp    string
	}{
		"if the URL is not https, name the field": {
			change: func(in *Input) { in.URL = "http://127.0.0.1:9443/validate" },
			exp:    `static webhook: URL: Invalid value: "http://127.0.0.1:9443/validate": must be an https URL`,
		},
		"if the URL has no host, say so": {
			change: func(in *Input) { in.URL = "https:///validate" },
			exp:    `static webhook: URL: Invalid value: "https:///validate": must name a host`,
		},
		"if the URL carries credentials or a query, refuse it as kube-apiserver would": {
			change: func(in *Input) { in.URL = "https://user@127.0.0.1:9443/validate?x=1" },
			exp:    `static webhook: [URL: Invalid value: "https://user@127.0.0.1:9443/validate?x=1": must not carry user information, URL: Invalid value: "https://user@127.0.0.1:9443/validate?x=1": must not carry a query or a fragment]`,
		},
		"if the CA bundle is not PEM, say what is wrong with it": {
			change: func(in *Input) { in.CABundle = []byte("not a certificate") },
			exp:    `static webhook: CABundle: Invalid value: the data is not PEM: no "-----BEGIN CERTIFICATE-----" block found`,
		},
		"if the failure policy is unknown, name the choices": {
			change: func(in *Input) { in.FailurePolicy = "Open" },
			exp:    `static webhook: FailurePolicy: Unsupported value: "Open": supported values: "Fail", "Ignore"`,
		},
		"if the timeout is beyond kube-apiserver's bounds, give them": {
			change: func(in *Input) { in.TimeoutSeconds = 31 },
			exp:    `static webhook: TimeoutSeconds: Invalid value: 31: must be in 1..30`,
		},
		"if the guard's service account is a username, ask for namespace/name": {
			change: func(in *Input) { in.GuardServiceAccount = "system:serviceaccount:a:b" },
			exp:    `static webhook: GuardServiceAccount: Invalid value: "system:serviceaccount:a:b": must be "namespace/name"`,
		},
		"if several inputs are wrong, name each": {
			change: func(in *Input) { in.FailurePolicy, in.TimeoutSeconds = "", 0 },
			exp:    `static webhook: [FailurePolicy: Unsupported value: "": supported values: "Fail", "Ignore", TimeoutSeconds: Invalid value: 0: must be in 1..30]`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			in := validInput(t)
			test.change(&in)
			vwc, err := ValidatingWebhookConfiguration(in)
			assert.EqualError(t, err, test.exp)
			assert.Nil(t, vwc)
			manifest, err := Manifest(in)
			assert.EqualError(t, err, test.exp)
			assert.Nil(t, manifest)
		})
	}
}

// Test_Manifest: the file is the configuration, and reads back strictly
// as one (a field kube-apiserver does not know would fail).
func Test_Manifest(t *testing.T) {
	in := validInput(t)
	in.BreakGlass = guardapi.Subjects{Groups: []string{"system:masters"}}
	in.GuardServiceAccount = "webhook-guard/webhook-guard"
	exp, err := ValidatingWebhookConfiguration(in)
	require.NoError(t, err)

	data, err := Manifest(in)
	require.NoError(t, err)
	var got admv1.ValidatingWebhookConfiguration
	require.NoError(t, yaml.UnmarshalStrict(data, &got))
	assert.Equal(t, exp, &got)
	assert.NotContains(t, string(data), "creationTimestamp", "an empty creation time is not part of the file")
}
