package vap

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

// Test_writerKeepsTrust: the matchCondition that skips a writer's write
// which keeps every entry and caBundle skips nothing a rule would deny, in
// either layout of a Secret CA.
func Test_writerKeepsTrust(t *testing.T) {
	cur, err := testpki.NewCA("keeps-current-ca")
	require.NoError(t, err)
	old, err := testpki.NewCA("keeps-old-ca")
	require.NoError(t, err)
	foreign, err := testpki.NewCA("keeps-foreign-ca")
	require.NoError(t, err)
	merged := append(slices.Clone(old.PEM), cur.PEM...)
	writer := &user.DefaultInfo{Name: "system:serviceaccount:app-system:controller"}
	intruder := &user.DefaultInfo{Name: "system:serviceaccount:other:intruder"}
	a, b := "a.app.io", "b.app.io"
	update := func(u user.Info, was, is []entry) vaptest.Request {
		return vaptest.Request{Operation: admission.Update, Name: "app", User: u, Old: parityObject("app", nil, was), Object: parityObject("app", nil, is)}
	}
	both := []entry{{a, cur.PEM}, {b, cur.PEM}}
	cases := map[string]struct {
		r    vaptest.Request
		deny string
	}{
		"if a writer keeps the CA in every entry, allow": {r: update(writer, both, both)},
		"if a writer keeps merged caBundles, allow": {
			r: update(writer, []entry{{a, merged}, {b, merged}}, []entry{{a, merged}, {b, merged}})},
		"if a writer merges the CA after the stored bundle in every entry, allow": {
			r: update(writer, []entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, merged}, {b, merged}})},
		"if a writer merges a foreign CA after the stored bundle in every entry, deny ca-mismatch": {
			r: update(writer, []entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, append(slices.Clone(old.PEM), foreign.PEM...)}, {b, append(slices.Clone(old.PEM), foreign.PEM...)}}), deny: "ca-mismatch"},
		"if a writer merges the CA after the stored bundle in every entry and renames one, deny ca-mismatch": {
			r: update(writer, []entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, merged}, {"c.app.io", merged}}), deny: "ca-mismatch"},
		"if a writer merges the CA into every entry but writes a foreign CA in one, deny ca-mismatch": {
			r: update(writer, []entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, merged}, {b, foreign.PEM}}), deny: "ca-mismatch"},
		"if a writer keeps the stored bundle in one entry and merges the other, allow": {
			r: update(writer, []entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, old.PEM}, {b, merged}})},
		"if a writer writes the CA over a foreign caBundle, allow": {
			r: update(writer, []entry{{a, foreign.PEM}, {b, cur.PEM}}, both)},
		"if a non-writer keeps every caBundle, deny not-owner": {r: update(intruder, both, both), deny: "not-owner"},
		"if a writer removes an entry that carried a caBundle, allow: its trust goes with it": {
			r: update(writer, both, []entry{{a, cur.PEM}})},
		"if a writer renames an entry, keeping the CA, allow: the new name holds the CA": {
			r: update(writer, both, []entry{{a, cur.PEM}, {"c.app.io", cur.PEM}})},
		"if a writer renames an entry, keeping a stored bundle that is not the CA, deny ca-mismatch": {
			r: update(writer, []entry{{a, cur.PEM}, {b, old.PEM}}, []entry{{a, cur.PEM}, {"c.app.io", old.PEM}}), deny: "ca-mismatch"},
		"if a writer writes a foreign caBundle, deny ca-mismatch": {
			r: update(writer, both, []entry{{a, cur.PEM}, {b, foreign.PEM}}), deny: "ca-mismatch"},
	}
	cfg := load(t, nonWriterConfig)
	for _, layout := range []struct {
		name  string
		param *guardapi.KeyRef
	}{{"CA literal", nil}, {"CA Secret as param", &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}}} {
		objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": {PEM: cur.PEM, Source: paritySource, Param: layout.param}}})
		require.NoError(t, err)
		ps := compileAll(t, objs)
		for name, c := range cases {
			t.Run(layout.name+"/"+name, func(t *testing.T) {
				r := c.r
				if layout.param != nil {
					r.Params = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app-system", Name: "app-ca"}, Data: map[string][]byte{"ca.crt": cur.PEM}}
				}
				msgs := ps.validate(t, r, true)
				if c.deny == "" {
					assert.Empty(t, msgs)
					return
				}
				require.NotEmpty(t, msgs)
				assert.Contains(t, msgs[0], c.deny)
			})
		}
	}
}

// Test_writerKeepsTrust_skips: which writes the matchCondition skips (the
// policy's validations are replaced by one that always denies, so a write
// is denied exactly when it is not skipped). A write that leaves every
// entry alone, and a uniform merge, replace or keep of the stored caBundle
// are skipped; a merge of a foreign CA, a bundle that is not the stored
// one followed by the CA, and a write that does not keep every stored
// caBundle alike are evaluated whole. A write that changes no entry is
// skipped on its generation whatever its caBundles hold; the generation a
// request sends decides nothing, as kube-apiserver sets it.
func Test_writerKeepsTrust_skips(t *testing.T) {
	cur, old, foreign := testpki.MustCA(t, "skips-current-ca"), testpki.MustCA(t, "skips-old-ca"), testpki.MustCA(t, "skips-foreign-ca")
	merged := append(slices.Clone(old.PEM), cur.PEM...)
	writer := &user.DefaultInfo{Name: "system:serviceaccount:app-system:controller"}
	a, b := "a.app.io", "b.app.io"
	update := func(was, is []entry) vaptest.Request {
		return vaptest.Request{Operation: admission.Update, Name: "app", User: writer, Old: parityObject("app", nil, was), Object: parityObject("app", nil, is)}
	}
	cases := map[string]struct {
		r       vaptest.Request
		skipped bool
	}{
		"if the write leaves every entry as stored": {
			r: update([]entry{{a, merged}, {b, merged}}, []entry{{a, merged}, {b, merged}}), skipped: true},
		"if the writer merges the CA after the stored bundle in every entry": {
			r: update([]entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, merged}, {b, merged}}), skipped: true},
		"if the writer merges one entry and writes the CA alone in the other": {
			r: update([]entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, merged}, {b, cur.PEM}}), skipped: true},
		"if the writer merges a foreign CA": {
			r: update([]entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, append(slices.Clone(old.PEM), foreign.PEM...)}, {b, old.PEM}})},
		"if the merged bundle does not start with the stored one": {
			r: update([]entry{{a, old.PEM}, {b, old.PEM}}, []entry{{a, append(slices.Clone(foreign.PEM), cur.PEM...)}, {b, merged}})},
		"if the stored caBundles differ and one entry is merged": {
			r: update([]entry{{a, old.PEM}, {b, foreign.PEM}}, []entry{{a, merged}, {b, foreign.PEM}})},
		"if the write changes only an annotation while the stored caBundles are foreign and differ": {
			r: annotated(update([]entry{{a, foreign.PEM}, {b, old.PEM}}, []entry{{a, foreign.PEM}, {b, old.PEM}})), skipped: true},
		"if the request carries the stored generation and changes a caBundle": {
			r: withGeneration(update([]entry{{a, cur.PEM}, {b, cur.PEM}}, []entry{{a, cur.PEM}, {b, foreign.PEM}}), 7, 7)},
		"if the request carries the stored generation and renames an entry": {
			r: withGeneration(update([]entry{{a, cur.PEM}, {b, cur.PEM}}, []entry{{a, cur.PEM}, {"c.app.io", cur.PEM}}), 7, 7)},
	}
	objs, err := Generate(Input{Config: load(t, nonWriterConfig), CAs: map[string]CA{"app": {PEM: cur.PEM, Source: paritySource}}})
	require.NoError(t, err)
	require.Len(t, objs.Policies, 1)
	p := objs.Policies[0].DeepCopy()
	p.Spec.Validations = []admv1.Validation{{Expression: "false", Message: "evaluated"}}
	v, err := vaptest.Compile(p)
	require.NoError(t, err)
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, !c.skipped, len(v.Validate(t.Context(), c.r)) > 0, "evaluated")
		})
	}
}

// annotated is r with an annotation added to the request's object: a
// write that leaves the webhooks alone.
func annotated(r vaptest.Request) vaptest.Request {
	r.Object = r.Object.DeepCopy()
	r.Object.SetAnnotations(map[string]string{"example.io/touched": "yes"})
	return r
}

// withGeneration is r with the generations its objects carry: the stored
// one, and the one the request sends. kube-apiserver (and vaptest, as it
// does) overwrites the latter before validating admission.
func withGeneration(r vaptest.Request, stored, sent int64) vaptest.Request {
	r.Old, r.Object = r.Old.DeepCopy(), r.Object.DeepCopy()
	r.Old.SetGeneration(stored)
	r.Object.SetGeneration(sent)
	return r
}

// Test_writerKeepsTrust_bigCA: a CA so large that the uniform rotation
// would take the matchCondition past kube-apiserver's expression limit is
// left out of it, so the policy is not refused for it.
func Test_writerKeepsTrust_bigCA(t *testing.T) {
	ca := testpki.MustCA(t, "big-ca")
	var big []byte
	for len(big) < 30000 {
		big = append(big, ca.PEM...)
	}
	for name, c := range map[string]struct {
		pem         []byte
		wantUniform bool
	}{"a CA of one certificate": {ca.PEM, true}, "a CA of 30 KB": {big, false}} {
		t.Run(name, func(t *testing.T) {
			objs, err := Generate(Input{Config: load(t, nonWriterConfig), CAs: map[string]CA{"app": {PEM: c.pem, Source: paritySource}}})
			require.NoError(t, err)
			var cond string
			for _, mc := range objs.Policies[0].Spec.MatchConditions {
				assert.LessOrEqual(t, len(mc.Expression), maxExpressionCodePoints, mc.Name)
				cond += mc.Expression
			}
			assert.Equal(t, c.wantUniform, strings.Contains(cond, "].all(k, "), "the uniform rotation is in the matchCondition")
		})
	}
}

// Test_writerKeepsTrust_skipsUnderParam: under the CA Secret param the -ca
// policy's matchCondition skips a uniform merge of the CA the guard synced
// (whose shifted texts it holds), and leaves a merge of another CA in the
// Secret, one the guard has not synced yet, to the policy's variables.
func Test_writerKeepsTrust_skipsUnderParam(t *testing.T) {
	synced, next, old := testpki.MustCA(t, "skips-synced-ca"), testpki.MustCA(t, "skips-next-ca"), testpki.MustCA(t, "skips-param-old-ca")
	writer := &user.DefaultInfo{Name: "system:serviceaccount:app-system:controller"}
	a, b := "a.app.io", "b.app.io"
	param := &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}
	objs, err := Generate(Input{Config: load(t, nonWriterConfig), CAs: map[string]CA{"app": {PEM: synced.PEM, Source: paritySource, Param: param}}})
	require.NoError(t, err)
	var p *admv1.ValidatingAdmissionPolicy
	for _, q := range objs.Policies {
		if q.Spec.ParamKind != nil {
			p = q.DeepCopy()
		}
	}
	require.NotNil(t, p, "the policy that reads the CA Secret")
	p.Spec.Validations = []admv1.Validation{{Expression: "false", Message: "evaluated"}}
	v, err := vaptest.Compile(p)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		secret  []byte
		skipped bool
	}{
		"if the Secret holds the synced CA and the writer merges it into every entry": {secret: synced.PEM, skipped: true},
		"if the Secret holds a CA the guard has not synced and the writer merges it":  {secret: next.PEM},
	} {
		t.Run(name, func(t *testing.T) {
			merged := append(slices.Clone(old.PEM), c.secret...)
			r := vaptest.Request{Operation: admission.Update, Name: "app", User: writer,
				Old: parityObject("app", nil, []entry{{a, old.PEM}, {b, old.PEM}}), Object: parityObject("app", nil, []entry{{a, merged}, {b, merged}}),
				Params: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app-system", Name: "app-ca"}, Data: map[string][]byte{"ca.crt": c.secret}}}
			assert.Equal(t, !c.skipped, len(v.Validate(t.Context(), r)) > 0, "evaluated")
		})
	}
}
