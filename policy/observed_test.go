package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	cabundle "github.com/webhook-guard/webhook-guard/policy/cabundle"
)

func Test_decideObserved(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, decideDoc(f))
	koordCA := CAResult{Set: cabundle.NewCASetFromFingerprints("secret koordinator-system/webhook-certs", f.Owner.FP), Resolved: true}
	audCA := CAResult{Set: cabundle.NewCASetFromFingerprints("configmap audited-system/ca", f.Owner.FP), Resolved: true}
	// Who wrote is unknown: the subject is the field managers, never a user,
	// so the break-glass group of a user cannot apply either.
	manager := User{Username: "fieldManager:replica-3"}

	observed := func(name string, old, next []byte, ca CAResult) Input {
		return Input{
			Operation: OperationUpdate, Kind: KindValidating, Name: name, User: manager, Observed: true, CA: ca,
			OldEntries: []Entry{{Name: whA, CABundle: old}},
			Entries:    []Entry{{Name: whA, CABundle: next}},
		}
	}
	tests := map[string]struct {
		input         Input
		expMapping    string
		expOutcome    Outcome
		expRule       Rule
		expViolations []Violation
		expRecord     bool
	}{
		"if an observed change writes the owner's CA, allow and do not record, although the writer is unknown": {
			input:      observed("koord", nil, f.Owner.PEM, koordCA),
			expMapping: "koordinator", expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if an observed change writes a foreign CA in an enforce mapping, the outcome is deny and it is recorded": {
			input:      observed("koord", f.Owner.PEM, f.Foreign.PEM, koordCA),
			expMapping: "koordinator", expOutcome: OutcomeDeny, expRule: RuleCAMismatch, expRecord: true,
			expViolations: []Violation{caMismatch(0, whA, "secret koordinator-system/webhook-certs", []string{f.Owner.Short()}, []string{f.Foreign.Short()})},
		},
		"if an observed change writes a foreign CA in an audit mapping, the outcome is audit": {
			input:      observed("audited", f.Owner.PEM, f.Foreign.PEM, audCA),
			expMapping: "audited", expOutcome: OutcomeAudit, expRule: RuleCAMismatch, expRecord: true,
			expViolations: []Violation{caMismatch(0, whA, "configmap audited-system/ca", []string{f.Owner.Short()}, []string{f.Foreign.Short()})},
		},
		"if an observed change empties a caBundle, it is a ca-mismatch": {
			input:      observed("koord", f.Owner.PEM, nil, koordCA),
			expMapping: "koordinator", expOutcome: OutcomeDeny, expRule: RuleCAMismatch, expRecord: true,
			expViolations: []Violation{caEmptied(0, whA)},
		},
		"if an observed change leaves caBundle alone, not-owner is never decided": {
			input:      observed("koord", f.Owner.PEM, f.Owner.PEM, CAResult{}),
			expMapping: "koordinator", expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if no mapping covers the configuration, the change is not judged": {
			input:      observed("someone-elses", nil, f.Foreign.PEM, CAResult{}),
			expOutcome: OutcomeAllow, expRule: RuleNone,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := tc.input
			m := cfg.MatchInput(&in)
			assert.Equal(t, m.Owner != nil && m.Owner.CA.PEM == "" && NeedsCA(&in), cfg.needsOwnerCA(m, &in),
				"an observed caBundle change needs the owner's CA although its subject is no writer")
			d := cfg.Decide(&in)
			assert.True(t, d.Observed)
			assert.Equal(t, tc.expMapping, d.Mapping)
			assert.Equal(t, tc.expOutcome, d.Outcome)
			assert.Equal(t, tc.expRule, d.Rule)
			assert.Equal(t, tc.expViolations, d.Violations)
			assert.Equal(t, tc.expRecord, d.Record)
			assert.Equal(t, "fieldManager:replica-3", d.Subject)
		})
	}
}

func Test_ObservedSubject(t *testing.T) {
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		managers []FieldManager
		exp      string
	}{
		"if the object names no manager, the subject says unknown": {exp: "fieldManager:unknown"},
		"if several managers own changed caBundles, they are listed once each, sorted": {
			managers: []FieldManager{{Name: "b", Operation: "Update", Time: at}, {Name: "a", Operation: "Apply"}, {Name: "b", Operation: "Update"}},
			exp:      "fieldManager:a,b",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.exp, ObservedSubject(tc.managers))
		})
	}
	assert.Equal(t, "kubectl-patch (Update 2026-12-01T05:00:00Z)", FieldManager{Name: "kubectl-patch", Operation: "Update", Time: at}.String())
}
