package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/writebudget"
)

// scriptedCA answers the lookups of one evaluation in turn and keeps the
// queries.
type scriptedCA struct {
	answers []CAAnswer
	asked   []CAQuery
}

func (s *scriptedCA) LookupCA(q CAQuery) CAAnswer {
	s.asked = append(s.asked, q)
	return s.answers[min(len(s.asked), len(s.answers))-1]
}

// budgetVerdict is a limiter that answers ok, and counts the takes.
type budgetVerdict struct {
	ok    bool
	taken []writebudget.Key
}

func (b *budgetVerdict) Take(key writebudget.Key, _ int) (bool, time.Duration) {
	b.taken = append(b.taken, key)
	return b.ok, 30 * time.Second
}

// servingVerdict answers every entry alike.
type servingVerdict struct{ verified, known bool }

func (s servingVerdict) CheckServing(GuardedKind, string, Entry) (bool, bool, string) {
	return s.verified, s.known, "unknown-authority at 10.0.0.1:443 for svc.ns.svc"
}

// Test_Evaluate: the one entry point asks for the owner's CA only when the
// decision needs it, asks again only after a ca-mismatch on an answer that
// may lag (and decides on the second answer), counts only an allowed
// caBundle change against the budget, and warns of a caBundle that does
// not verify what was served at the last probe.
func Test_Evaluate(t *testing.T) {
	f := testFixtures(t)
	koord := "  ca: {secret: {namespace: koordinator-system, name: webhook-certs}}\n"
	cfg := mustLoad(t, strings.Replace(decideDoc(f), koord, koord+"  writeBudget: {perMinute: 5}\n", 1))
	denying := mustLoad(t, strings.Replace(decideDoc(f), koord, koord+"  writeBudget: {perMinute: 5}\n  verifyServing: deny\n", 1))
	auditDenying := mustLoad(t, strings.Replace(strings.Replace(decideDoc(f), koord, koord+"  verifyServing: deny\n", 1), "  mode: enforce\n", "  mode: audit\n", 1))
	source := "secret koordinator-system/webhook-certs"
	owner := CAAnswer{CAResult: CAResult{Set: cabundle.NewCASetFromFingerprints(source, f.Owner.FP), Resolved: true}}
	rotated := CAAnswer{CAResult: CAResult{Set: cabundle.NewCASetFromFingerprints(source, f.OwnerNew.FP), Resolved: true}}
	lagging := owner
	lagging.MayLag = true
	write := func(user string, bundle []byte) *Input {
		return &Input{Operation: OperationUpdate, Kind: KindValidating, Name: "koord", User: User{Username: user},
			OldEntries: []Entry{{Name: whA, CABundle: f.Expired.PEM}}, Entries: []Entry{{Name: whA, CABundle: bundle}}}
	}
	writer, intruder := sa("koordinator-system", "koord-manager"), sa("kube-system", "intruder")

	tests := map[string]struct {
		cfg     *Mappings
		in      *Input
		answers []CAAnswer
		budget  *budgetVerdict
		serving ServingCheck
		asked   int
		rule    Rule
		outcome Outcome
		taken   int
		notices int
		recheck bool
	}{
		"if a non-writer writes a caBundle, decide on who it is and ask nothing": {
			in: write(intruder, f.Foreign.PEM), answers: []CAAnswer{owner}, asked: 0, rule: RuleNotOwner, outcome: OutcomeDeny,
		},
		"if the writer writes the owner's CA, ask once and allow": {
			in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, asked: 1, outcome: OutcomeAllow,
		},
		"if a fresh answer finds a ca-mismatch, deny without asking again": {
			in: write(writer, f.Foreign.PEM), answers: []CAAnswer{owner}, asked: 1, rule: RuleCAMismatch, outcome: OutcomeDeny,
		},
		"if an answer that may lag finds a ca-mismatch, ask again and decide on the second answer (a rotation racing the cache)": {
			in: write(writer, f.OwnerNew.PEM), answers: []CAAnswer{lagging, rotated}, asked: 2, outcome: OutcomeAllow, recheck: true,
		},
		"if the second answer confirms the mismatch, deny": {
			in: write(writer, f.Foreign.PEM), answers: []CAAnswer{lagging, owner}, asked: 2, rule: RuleCAMismatch, outcome: OutcomeDeny, recheck: true,
		},
		"if an allowed change is within the writer's budget, count it": {
			in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, budget: &budgetVerdict{ok: true}, asked: 1, outcome: OutcomeAllow, taken: 1,
		},
		"if an allowed change is beyond the writer's budget, refuse it as write-budget": {
			in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, budget: &budgetVerdict{}, asked: 1, rule: RuleWriteBudget, outcome: OutcomeDeny, taken: 1,
		},
		"if a change is denied, count nothing against the budget": {
			in: write(writer, f.Foreign.PEM), answers: []CAAnswer{owner}, budget: &budgetVerdict{}, asked: 1, rule: RuleCAMismatch, outcome: OutcomeDeny,
		},
		"if the written caBundle does not verify what was served, allow with a notice": {
			in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, serving: servingVerdict{known: true}, asked: 1, outcome: OutcomeAllow, notices: 1,
		},
		"if it verifies, or nothing was probed, no notice": {
			in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, serving: servingVerdict{verified: true, known: true}, asked: 1, outcome: OutcomeAllow,
		},
		"if the mapping says verifyServing: deny, refuse a caBundle that does not verify what was served, and spend no budget": {
			cfg: denying, in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, budget: &budgetVerdict{ok: true}, serving: servingVerdict{known: true}, asked: 1,
			rule: RuleServingUnverified, outcome: OutcomeDeny,
		},
		"if it says deny in audit mode, allow and record a would-deny": {
			cfg: auditDenying, in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, serving: servingVerdict{known: true}, asked: 1,
			rule: RuleServingUnverified, outcome: OutcomeAudit,
		},
		"if it says deny but the last probe reached nothing, allow: an unprobed entry is never refused": {
			cfg: denying, in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, budget: &budgetVerdict{ok: true}, serving: servingVerdict{}, asked: 1, outcome: OutcomeAllow, taken: 1,
		},
		"if it says deny and the caBundle verifies, allow and count it": {
			cfg: denying, in: write(writer, f.Owner.PEM), answers: []CAAnswer{owner}, budget: &budgetVerdict{ok: true}, serving: servingVerdict{verified: true, known: true}, asked: 1, outcome: OutcomeAllow, taken: 1,
		},
		"if the write is denied, no notice": {
			in: write(intruder, f.Owner.PEM), serving: servingVerdict{known: true}, rule: RuleNotOwner, outcome: OutcomeDeny,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ca := &scriptedCA{answers: tc.answers}
			env := Env{CA: ca, Serving: tc.serving}
			if tc.budget != nil {
				env.Budget = tc.budget
			}
			if tc.cfg == nil {
				tc.cfg = cfg
			}
			d := tc.cfg.Evaluate(tc.in, env)
			assert.Len(t, ca.asked, tc.asked, "lookups")
			if tc.rule == "" {
				tc.rule = RuleNone
			}
			assert.Equal(t, tc.rule, d.Rule)
			assert.Equal(t, tc.outcome, d.Outcome)
			if tc.budget != nil {
				assert.Len(t, tc.budget.taken, tc.taken, "budget takes")
			}
			assert.Len(t, d.Notices, tc.notices)
			if tc.rule == RuleServingUnverified {
				assert.Contains(t, d.Message(), "does not verify the certificate the entry's endpoint served at the last probe (unknown-authority at 10.0.0.1:443 for svc.ns.svc)")
				assert.Contains(t, d.Message(), "verifyServing: deny")
				assert.True(t, d.Record, "a refusal for the served chain is recorded")
			}
			for _, n := range d.Notices {
				assert.Contains(t, n, "does not verify the certificate")
				assert.Contains(t, d.Warnings(), n, "kubectl prints the notice")
			}
			if tc.recheck {
				require.Len(t, ca.asked, 2)
				require.NotNil(t, ca.asked[1].Recheck)
				assert.True(t, ca.asked[1].Recheck.HasRule(RuleCAMismatch), "the second ask carries the mismatch it rechecks")
			}
		})
	}
}

// Test_Evaluate_withoutLookup: a decision that needs the owner's CA and
// was given no way to look it up is ca-unavailable, never an allow.
func Test_Evaluate_withoutLookup(t *testing.T) {
	f := testFixtures(t)
	cfg := mustLoad(t, decideDoc(f))
	d := cfg.Evaluate(&Input{Operation: OperationUpdate, Kind: KindValidating, Name: "koord", User: User{Username: sa("koordinator-system", "koord-manager")},
		OldEntries: []Entry{{Name: whA, CABundle: f.Owner.PEM}}, Entries: []Entry{{Name: whA, CABundle: f.OwnerNew.PEM}}}, Env{})
	assert.Equal(t, RuleCAUnavailable, d.Rule)
	assert.False(t, d.Allowed())
}
