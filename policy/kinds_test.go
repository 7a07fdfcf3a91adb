package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_everyGuardedKind walks guardapi.Kinds: a mapping that names one
// object of each kind claims it (Load indexes every kind's names), a label
// selector claims one only where a mapping owns the whole object, a
// foreign CA the owner's controller writes is denied at the path where the
// kind's row says the caBundle is, and a write by someone else that
// leaves the trust alone is the mapping's to decide only where it owns the
// whole object. A kind added to guardapi.Kinds that the decision does not
// handle fails here.
func Test_everyGuardedKind(t *testing.T) {
	f := testFixtures(t)
	doc, err := json.Marshal(guardapi.GuardConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: guardapi.APIVersion, Kind: guardapi.Kind}, DefaultMode: guardapi.ModeEnforce,
		Owners: []guardapi.Owner{
			{Name: "all", Match: guardapi.ExampleMatch(), Writers: guardapi.Subjects{ServiceAccounts: []string{"all-system/controller"}}, CA: guardapi.CASource{PEM: string(f.Inline.PEM)}},
			{Name: "labelled", Match: guardapi.Match{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
				Writers: guardapi.Subjects{ServiceAccounts: []string{"team-a/controller"}}, CA: guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "team-a", Name: "ca"}}},
		},
	})
	require.NoError(t, err)
	cfg := mustLoad(t, string(doc))
	owner := User{Username: sa("all-system", "controller")}
	installer := User{Username: sa("argocd", "argocd-application-controller")}

	for _, k := range guardapi.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			kind := GuardedKind(k.Kind)
			if m := cfg.Match(kind, k.ExampleName()); assert.NotNil(t, m.Owner, "the mapping that names it does not claim it") {
				assert.Equal(t, "all", m.Owner.Name)
			}
			m := cfg.Match(kind, "other.example.com", map[string]string{"team": "a"})
			assert.Equal(t, !k.OwnsTrustOnly, m.Owner != nil, "a label selector claims it")

			name, bundleField := "example.webhook-guard.io", strings.Join(k.Entries.CABundlePath(), ".")
			if k.Entries.One() {
				name = k.Entries.Name
			} else {
				bundleField = k.Entries.List + "[0]." + bundleField
			}
			write := func(user User, bundle []byte) *Input {
				return &Input{Operation: OperationUpdate, Kind: kind, Name: k.ExampleName(), User: user,
					OldEntries: []Entry{{Name: name, CABundle: f.Inline.PEM}}, Entries: []Entry{{Name: name, CABundle: bundle}}}
			}

			d := cfg.Decide(write(owner, f.Foreign.PEM))
			assert.Equal(t, RuleCAMismatch, d.Rule)
			if assert.NotEmpty(t, d.Violations) {
				assert.Equal(t, bundleField, d.Violations[0].Field)
			}
			d = cfg.Decide(write(installer, f.Inline.PEM))
			if k.OwnsTrustOnly {
				assert.Equal(t, RuleNone, d.Rule, "a write that leaves the trust alone")
			} else {
				assert.Equal(t, RuleNotOwner, d.Rule, "a write by a subject that is no writer")
			}
		})
	}
}
