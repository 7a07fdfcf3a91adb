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

// Test_Explain generates every layout (a mapping per kind of CA source and
// per guarded kind, the CA as a literal, as a param, and as a param whose
// Secret is missing, and a label-selected mapping) and holds the
// explanation tables to what the generator writes: every matchCondition,
// variable and validation has a guarantee, and every guarantee is some
// expression's. A new variable without its words fails here, and so does a
// stale entry.
func Test_Explain(t *testing.T) {
	cur := testpki.MustCA(t, "owner-ca")
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	used := map[string]bool{}
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
			for _, p := range objs.Policies {
				es := Explain(p)
				require.Len(t, es, len(p.Spec.MatchConditions)+len(p.Spec.Variables)+len(p.Spec.Validations), p.Name)
				for _, e := range es {
					assert.NotEmpty(t, e.Guarantee, "%s/%s: %s of %s %q has no guarantee in explain.go", name, cfgName, p.Name, e.Field, e.Name)
					used[e.Field+"/"+e.Name] = true
				}
				for _, v := range p.Spec.Validations {
					used["reads/"+readsOf(v.Expression)] = true
				}
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

// Test_Format_everyExpression lays out every expression the generator
// writes (celfmt, as `render policy --explain` prints them) and holds each
// layout to its expression: both parse to one expression.
func Test_Format_everyExpression(t *testing.T) {
	cur := testpki.MustCA(t, "owner-ca")
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	for _, ca := range []CA{{PEM: cur.PEM, Source: paritySource}, {PEM: cur.PEM, Source: paritySource, Param: param}} {
		c := load(t, parityConfig)
		cas := map[string]CA{}
		for _, o := range c.Spec.Owners {
			cas[o.Name] = ca
		}
		objs, err := Generate(Input{Config: c, CAs: cas})
		require.NoError(t, err)
		for _, p := range objs.Policies {
			var exprs []string
			for _, c := range p.Spec.MatchConditions {
				exprs = append(exprs, c.Expression)
			}
			for _, v := range p.Spec.Variables {
				exprs = append(exprs, v.Expression)
			}
			for _, v := range p.Spec.Validations {
				exprs = append(exprs, v.Expression, v.MessageExpression)
			}
			for _, e := range exprs {
				laidOut, err := celfmt.Format(e, 4)
				require.NoError(t, err, e)
				want, err := celfmt.Inline(e)
				require.NoError(t, err)
				got, err := celfmt.Inline(laidOut)
				require.NoError(t, err, laidOut)
				require.Equal(t, want, got, "%s: the layout parses to another expression:\n%s", p.Name, laidOut)
			}
		}
	}
}
