package vap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/celfmt"
)

// everyLayout generates every layout: a mapping per kind of CA source and
// per guarded kind (parityConfig), and a label-selected one, with the CA
// as a literal, as a param, as a param whose Secret is missing,
// unresolved, and as a param whose literal is unknown.
func everyLayout(t *testing.T) map[string][]*admv1.ValidatingAdmissionPolicy {
	t.Helper()
	cur := testpki.MustCA(t, "owner-ca")
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	out := map[string][]*admv1.ValidatingAdmissionPolicy{}
	for name, ca := range map[string]CA{
		"CA literal":                 {PEM: cur.PEM, Source: paritySource},
		"CA Secret as param":         {PEM: cur.PEM, Source: paritySource, Param: param},
		"CA Secret missing":          {Err: "Secret app-system/app-ca: it does not exist", Param: param, ParamMissing: true},
		"CA unresolved, no Secret":   {Err: "unreadable"},
		"CA Secret, literal unknown": {Err: "unreadable", Param: param},
	} {
		for cfgName, cfg := range map[string]string{"parity": parityConfig, "selector": selectorConfig} {
			c := load(t, cfg)
			cas := map[string]CA{}
			for _, o := range c.Spec.Owners {
				cas[o.Name] = ca
			}
			cas["injected"] = CA{PEM: cur.PEM, Source: paritySource, Pointers: []policy.Pointer{{CAFrom: parityInject}}}
			objs, err := Generate(Input{Config: c, CAs: cas})
			require.NoError(t, err)
			out[name+"/"+cfgName] = objs.Policies
		}
	}
	return out
}

// Test_Explain holds the explanation tables to what the generator writes,
// in every layout: every matchCondition, variable and validation has a
// guarantee, and every guarantee is some expression's. A new variable
// without its words fails here, and so does a stale entry.
func Test_Explain(t *testing.T) {
	used := map[string]bool{}
	for layout, policies := range everyLayout(t) {
		for _, p := range policies {
			es := Explain(p)
			require.Len(t, es, len(p.Spec.MatchConditions)+len(p.Spec.Variables)+len(p.Spec.Validations), p.Name)
			for _, e := range es {
				assert.NotEmpty(t, e.Guarantee, "%s: %s of %s %q has no guarantee in explain.go", layout, p.Name, e.Field, e.Name)
				used[e.Field+"/"+e.Name] = true
			}
			for _, v := range p.Spec.Validations {
				used["reads/"+readsOf(v.Expression)] = true
			}
		}
	}
	for n := range conditionGuarantees {
		assert.True(t, used["matchConditions/"+n], "conditionGuarantees[%q] explains no generated matchCondition", n)
	}
	for n := range variableGuarantees {
		assert.True(t, used["variables/"+n], "variableGuarantees[%q] explains no generated variable", n)
	}
	for _, g := range validationGuarantees {
		assert.True(t, used["reads/"+g.reads], "validationGuarantees[%q] (reads %q) explains no generated validation", g.rule, g.reads)
	}
}

// readsOf is the row of validationGuarantees that explains expr.
func readsOf(expr string) string {
	for _, e := range Explain(&admv1.ValidatingAdmissionPolicy{Spec: admv1.ValidatingAdmissionPolicySpec{Validations: []admv1.Validation{{Expression: expr}}}}) {
		for _, g := range validationGuarantees {
			if g.guarantee == e.Guarantee {
				return g.reads
			}
		}
	}
	return ""
}

// expressionsOf are p's variables, validations and messages: where a
// variable can hold what several of them read (a matchCondition cannot
// read variables).
func expressionsOf(p *admv1.ValidatingAdmissionPolicy) []string {
	var out []string
	for _, v := range p.Spec.Variables {
		out = append(out, v.Expression)
	}
	for _, v := range p.Spec.Validations {
		out = append(out, v.Expression, v.MessageExpression)
	}
	return out
}

// Test_Format_everyExpression lays out every expression the generator
// writes (celfmt, as `render policy --explain` prints them) and holds each
// layout to its expression: both parse to one expression.
func Test_Format_everyExpression(t *testing.T) {
	for layout, policies := range everyLayout(t) {
		for _, p := range policies {
			exprs := expressionsOf(p)
			for _, c := range p.Spec.MatchConditions {
				exprs = append(exprs, c.Expression)
			}
			for _, e := range exprs {
				laidOut, err := celfmt.Format(e, 4)
				require.NoError(t, err, e)
				want, err := celfmt.Inline(e)
				require.NoError(t, err)
				got, err := celfmt.Inline(laidOut)
				require.NoError(t, err, laidOut)
				require.Equal(t, want, got, "%s: %s: the layout parses to another expression:\n%s", layout, p.Name, laidOut)
			}
		}
	}
}

// minRule is the length from which a sub-expression spelled twice in one
// policy is a rule a variable should hold. Shorter ones are the guards of
// one field (x != null && has(x.f)) and paths, which a variable would not
// make clearer.
const minRule = 60

// Test_noRuleSpelledTwice: in every layout, no sub-expression of minRule
// characters or more that reads only what kube-apiserver binds (so that a
// variable could hold it) stands twice in a policy's variables,
// validations and messages. A rule spelled twice drifts; a variable states
// it once and is evaluated once per request.
func Test_noRuleSpelledTwice(t *testing.T) {
	for layout, policies := range everyLayout(t) {
		for _, p := range policies {
			count := map[string]int{}
			for _, e := range expressionsOf(p) {
				subs, err := celfmt.ClosedSubExpressions(e, minRule)
				require.NoError(t, err, e)
				for _, s := range subs {
					count[s]++
				}
			}
			for s, n := range count {
				assert.Equal(t, 1, n, "%s: %s spells this %d times; a variable should hold it:\n%s", layout, p.Name, n, s)
			}
		}
	}
}
