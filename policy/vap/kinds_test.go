package vap

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapengine"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

// Test_everyKindHasPolicies walks guardapi.Kinds: for a mapping naming
// each kind's example object, some generated policy matches writes of the
// kind's resource (its matchConstraints, as kube-apiserver matches them),
// and those policies deny a subject that is no writer replacing the
// caBundle. A kind the policy shape generates nothing for would be
// unguarded in that shape, and fails here.
func Test_everyKindHasPolicies(t *testing.T) {
	owner, foreign := testpki.MustCA(t, "owner-ca"), testpki.MustCA(t, "foreign-ca")
	doc, err := json.Marshal(map[string]any{"apiVersion": guardapi.APIVersion, "kind": guardapi.Kind, "defaultMode": guardapi.ModeEnforce,
		"owners": []guardapi.Owner{{Name: "example", Match: guardapi.ExampleMatch(),
			Writers: guardapi.Subjects{ServiceAccounts: []string{"example-system/example-controller"}}, CA: guardapi.CASource{PEM: string(owner.PEM)}}}})
	require.NoError(t, err)
	cfg, err := policy.Load(doc)
	require.NoError(t, err)
	objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"example": {PEM: owner.PEM, Source: "inline"}}})
	require.NoError(t, err)
	intruder := &user.DefaultInfo{Name: "system:serviceaccount:other:intruder"}

	for _, k := range guardapi.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			r := vaptest.Request{Operation: admission.Update, Name: k.ExampleName(), User: intruder,
				Old: &unstructured.Unstructured{Object: k.Example(owner.PEM)}, Object: &unstructured.Unstructured{Object: k.Example(foreign.PEM)}}
			attrs, gvr := vapengine.Attributes(r.Operation, r.Name, r.Object, r.Old, r.User)
			require.Equal(t, k.Resource, gvr.Resource, "vapengine's resource of the kind (it reads any other kind as a ValidatingWebhookConfiguration)")
			var msgs []string
			matched := 0
			for _, p := range objs.Policies {
				if !matchesResource(p, attrs) {
					continue
				}
				matched++
				v, err := vaptest.Compile(p)
				require.NoError(t, err, p.Name)
				msgs = append(msgs, v.Validate(t.Context(), r)...)
			}
			require.NotZero(t, matched, "no generated policy matches writes of %s", k.Resource)
			assert.NotEmpty(t, msgs, "a non-writer replaces the caBundle and no policy denies it")
		})
	}
}

// matchesResource reports whether p's matchConstraints match the request,
// as kube-apiserver's rule matcher matches a resource rule.
func matchesResource(p *admv1.ValidatingAdmissionPolicy, attrs admission.Attributes) bool {
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		if m := (rules.Matcher{Rule: r.RuleWithOperations, Attr: attrs}); m.Matches() {
			return true
		}
	}
	return false
}
