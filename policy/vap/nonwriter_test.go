package vap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

const nonWriterConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
owners:
  - name: app
    mode: audit
    match: {validating: [app]}
    writers: {serviceAccounts: [app-system/controller]}
    ca: {secret: {namespace: app-system, name: app-ca}}
`

// Test_nonWriterLearnsNothing: a subject that may not write is decided on
// who it is, in the policy shape as in the static one. In audit mode every
// failed validation becomes a warning to the client and the audit log's
// validation_failure annotation, so a non-writer's request, whatever it
// writes, must fail not-owner alone: no message may name the owner's CA
// source or fingerprints, in either layout of a Secret CA.
func Test_nonWriterLearnsNothing(t *testing.T) {
	owner, err := testpki.NewCA("non-writer-owner-ca")
	require.NoError(t, err)
	foreign, err := testpki.NewCA("non-writer-foreign-ca")
	require.NoError(t, err)
	set, err := cabundle.NewCASet(paritySource, owner.PEM)
	require.NoError(t, err)
	cfg := load(t, nonWriterConfig)
	intruder := &user.DefaultInfo{Name: "system:serviceaccount:other:intruder"}
	a, b := "a.app.io", "b.app.io"
	requests := map[string]vaptest.Request{
		"a foreign CA": {Operation: admission.Update, Name: "app", User: intruder,
			Old: parityObject("app", nil, []entry{{a, owner.PEM}}), Object: parityObject("app", nil, []entry{{a, foreign.PEM}})},
		"an emptied caBundle": {Operation: admission.Update, Name: "app", User: intruder,
			Old: parityObject("app", nil, []entry{{a, owner.PEM}}), Object: parityObject("app", nil, []entry{{a, nil}})},
		"a removed entry": {Operation: admission.Update, Name: "app", User: intruder,
			Old: parityObject("app", nil, []entry{{a, owner.PEM}, {b, owner.PEM}}), Object: parityObject("app", nil, []entry{{a, owner.PEM}})},
		"a CREATE with no caBundle": {Operation: admission.Create, Name: "app", User: intruder,
			Object: parityObject("app", nil, []entry{{a, nil}})},
	}
	for _, layout := range []struct {
		name  string
		param *guardapi.KeyRef
	}{{"CA literal", nil}, {"CA Secret as param", &guardapi.KeyRef{Namespace: "app-system", Name: "app-ca", Key: "ca.crt"}}} {
		objs, err := Generate(Input{Config: cfg, CAs: map[string]CA{"app": {PEM: owner.PEM, Source: paritySource, Fingerprints: set.Short(), Param: layout.param}}})
		require.NoError(t, err)
		ps := compileAll(t, objs)
		for name, r := range requests {
			t.Run(layout.name+"/"+name, func(t *testing.T) {
				if layout.param != nil {
					r.Params = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app-system", Name: "app-ca"}, Data: map[string][]byte{"ca.crt": owner.PEM}}
				}
				msgs := ps.validate(t, r, true)
				require.Len(t, msgs, 1, "not-owner alone: %q", msgs)
				assert.Contains(t, msgs[0], `not-owner: userInfo: "system:serviceaccount:other:intruder" is not a writer`)
				assert.NotContains(t, msgs[0], "Secret app-system/app-ca", "the CA source")
				for _, fp := range set.Short() {
					assert.NotContains(t, strings.ToLower(msgs[0]), strings.ToLower(fp), "a fingerprint of the owner's CA")
				}
			})
		}
	}
}
