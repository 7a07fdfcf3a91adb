package vap

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		"if a writer writes the CA over a foreign caBundle, allow": {
			r: update(writer, []entry{{a, foreign.PEM}, {b, cur.PEM}}, both)},
		"if a non-writer keeps every caBundle, deny not-owner": {r: update(intruder, both, both), deny: "not-owner"},
		"if a writer removes an entry that carried a caBundle, deny ca-mismatch": {
			r: update(writer, both, []entry{{a, cur.PEM}}), deny: "ca-mismatch"},
		"if a writer renames an entry, keeping its caBundle, deny ca-mismatch": {
			r: update(writer, both, []entry{{a, cur.PEM}, {"c.app.io", cur.PEM}}), deny: "ca-mismatch"},
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
