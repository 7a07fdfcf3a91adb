package static

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vapengine"
)

// Test_everyKindIsSent walks guardapi.Kinds: with a mapping naming each
// kind's example object, kube-apiserver's own rule and matchCondition
// matchers send an UPDATE of each example object to the enforcing entry.
// A kind the static configuration's rules or conditions leave out would
// be written without the guard ever deciding, and fails here.
func Test_everyKindIsSent(t *testing.T) {
	in := validInput(t)
	in.TrustObjects = TrustObjectsOf(&guardapi.GuardConfig{Owners: []guardapi.Owner{{Name: "example", Match: guardapi.ExampleMatch()}}})
	vwc, err := ValidatingWebhookConfiguration(in)
	require.NoError(t, err)
	guard := &vwc.Webhooks[0]
	require.Equal(t, WebhookName, guard.Name)
	matcher := webhook.NewValidatingWebhookAccessor("uid", ConfigName, guard).GetCompiledMatcher(plugincel.NewConditionCompiler(vapengine.Env()))
	installer := &user.DefaultInfo{Name: "installer", Groups: []string{"system:authenticated"}}

	for _, k := range guardapi.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: k.Example([]byte("new"))}
			old := &unstructured.Unstructured{Object: k.Example([]byte("old"))}
			attrs, gvr := vapengine.Attributes(admission.Update, k.ExampleName(), obj, old, installer)
			require.Equal(t, k.Resource, gvr.Resource, "vapengine's resource of the kind")
			matched := false
			for _, r := range guard.Rules {
				if m := (rules.Matcher{Rule: r, Attr: attrs}); m.Matches() {
					matched = true
				}
			}
			assert.True(t, matched, "no rule of the enforcing entry matches %s", gvr)
			res := matcher.Match(context.Background(), attrs, nil, authorizer.UnconditionalAuthorizer(nil))
			require.NoError(t, res.Error)
			assert.True(t, res.Matches, "the condition %q leaves it out", res.FailedConditionName)
		})
	}
}
