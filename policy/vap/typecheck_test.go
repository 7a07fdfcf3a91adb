package vap

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// typeChecker is the TypeChecker kube-controller-manager's
// ValidatingAdmissionPolicy status controller runs
// (cmd/kube-controller-manager/app/validatingadmissionpolicystatus.go), whose
// warnings land in status.typeChecking. kube-controller-manager resolves
// schemas from the built-in OpenAPI definitions combined with discovery; here
// discovery serves the OpenAPI v3 documents of the real kube-apiserver
// v1.37.2 (testdata/openapi, trimmed to the ConfigMap and webhook
// configuration schemas), through the same resolver.ClientDiscoveryResolver.
func typeChecker(t *testing.T) *validating.TypeChecker {
	t.Helper()
	docs := map[string]string{"api/v1": "api_v1.json", "apis/admissionregistration.k8s.io/v1": "apis_admissionregistration.k8s.io_v1.json"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/openapi/v3" {
			var paths []string
			for p := range docs {
				paths = append(paths, fmt.Sprintf("%q: {\"serverRelativeURL\": \"/openapi/v3/%s?hash=test\"}", p, p))
			}
			fmt.Fprintf(w, `{"paths": {%s}}`, strings.Join(paths, ","))
			return
		}
		file, ok := docs[strings.TrimPrefix(r.URL.Path, "/openapi/v3/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile(filepath.Join("testdata", "openapi", file))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	return &validating.TypeChecker{
		SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: dc},
		RestMapper:     testrestmapper.TestOnlyStaticRESTMapper(clientgoscheme.Scheme),
	}
}

// Test_generatedPoliciesTypeCheck asserts that kube-controller-manager
// would report no type-check warning for any generated policy: every
// expression compiles against the real schemas of both webhook
// configuration kinds.
func Test_generatedPoliciesTypeCheck(t *testing.T) {
	tc := typeChecker(t)
	for name, cfg := range map[string]string{
		"if mappings name configurations in both modes":                 namesConfig,
		"if a mapping selects by label and another is injected":         selectorConfig,
		"if a mapping has both names and a selector and no break-glass": bothConfig,
		"if a mapping pins the CA cainjector injects":                   pinnedConfig,
	} {
		t.Run(name, func(t *testing.T) {
			objs := generate(t, cfg)
			require.NotEmpty(t, objs.Policies)
			for _, p := range objs.Policies {
				assert.Empty(t, tc.Check(p), "type-check warnings of policy %s", p.Name)
				assert.Empty(t, tc.Check(matchConditionsAsValidations(p)), "type-check warnings of policy %s's matchConditions", p.Name)
			}
		})
	}
}

// pinnedConfig pins an injected mapping's CA: its policy compares the CA
// pointer with the pin.
const pinnedConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
  - name: pinned
    mode: enforce
    match: {validating: [pinned-webhooks], mutating: [pinned-webhooks]}
    writers: {serviceAccounts: [app/controller]}
    ca: {injectedByCertManager: {secret: {namespace: app, name: serving}}}
`

// matchConditionsAsValidations is p with its matchConditions as its only
// validations. The TypeChecker leaves matchConditions out (kube-apiserver
// compiles them against untyped objects when the policy is written), so
// this checks them against the real schemas too: a field that does not
// exist, or a comparison of the wrong types, is reported.
func matchConditionsAsValidations(p *admv1.ValidatingAdmissionPolicy) *admv1.ValidatingAdmissionPolicy {
	c := p.DeepCopy()
	c.Spec.Validations = nil
	for _, mc := range p.Spec.MatchConditions {
		c.Spec.Validations = append(c.Spec.Validations, admv1.Validation{Expression: mc.Expression})
	}
	return c
}

// Test_matchConditionsTypeCheck is the negative control of
// matchConditionsAsValidations: a matchCondition reading a field the
// request does not have is reported.
func Test_matchConditionsTypeCheck(t *testing.T) {
	tc := typeChecker(t)
	p := generate(t, namesConfig).Policies[0].DeepCopy()
	p.Spec.MatchConditions = []admv1.MatchCondition{{Name: "typo", Expression: `object.metadata.nmae == "x"`}}
	warnings := tc.Check(matchConditionsAsValidations(p))
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].Warning, "undefined field 'nmae'")
}

// Test_typeCheckerSeesTheSchemas is the negative control: the checker
// above does resolve the webhook configuration schemas, so an expression
// comparing caBundle (bytes to the type checker) with a string literal is
// reported; the generated policies compare string(caBundle) instead.
func Test_typeCheckerSeesTheSchemas(t *testing.T) {
	tc := typeChecker(t)
	p := generate(t, namesConfig).Policies[0].DeepCopy()
	p.Spec.Validations = []admv1.Validation{{Expression: `object.webhooks.all(w, w.clientConfig.caBundle == "b3duZXIgQ0E=")`}}
	warnings := tc.Check(p)
	require.Len(t, warnings, 1)
	assert.Equal(t, "spec.validations[0].expression", warnings[0].FieldRef)
	assert.Contains(t, warnings[0].Warning, "no matching overload for '_==_' applied to '(bytes, string)'")
}
