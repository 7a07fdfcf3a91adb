package review

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/auditlog"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
)

// Test_Suggest: review hands a finding's facts to its rule's suggestion
// (the wording is tested with the rule table, in policy).
func Test_Suggest(t *testing.T) {
	const vwc = "ValidatingWebhookConfiguration/app-webhooks"
	caMismatch := policy.RuleCAMismatch.Info().Suggest
	tests := map[string]struct {
		finding Finding
		exp     string
	}{
		"if the rule is in the rule table, fill in its suggestion with the finding's facts": {
			finding: Finding{Rule: "ca-mismatch", Mapping: "app", Subject: "bob", Configuration: vwc, ExpectedCA: "9f86d081884c7d65", FoundCA: "1b4f0e9851971998"},
			exp:     caMismatch(policy.FindingFacts{Mapping: "app", Subject: "bob", Configuration: vwc, ExpectedCA: "9f86d081884c7d65", FoundCA: "1b4f0e9851971998"}),
		},
		"if the observer recorded the finding, suggest for a change seen after the fact": {
			finding: Finding{Rule: "ca-mismatch", Mapping: "app", Subject: "fieldManager:helm", Configuration: vwc, Origin: "observed", FieldManagers: "helm (Apply)"},
			exp:     caMismatch(policy.FindingFacts{Mapping: "app", Subject: "fieldManager:helm", Configuration: vwc, Observed: true, FieldManagers: "helm (Apply)"}),
		},
		"if the audit log holds the finding, suggest as for a request the guard decided": {
			finding: Finding{Rule: "ca-mismatch", Mapping: "app", Subject: "bob", Configuration: vwc, Origin: auditlog.Origin},
			exp:     caMismatch(policy.FindingFacts{Mapping: "app", Subject: "bob", Configuration: vwc}),
		},
		"if replicas flap the caBundle, suggest sharing one CA": {
			finding: Finding{Rule: "flapping", Mapping: "app", Configuration: vwc, Writers: "system:serviceaccount:app-system:controller"},
			exp:     flapping.Suggestion(policy.FindingFacts{Mapping: "app", Configuration: vwc, Writers: "system:serviceaccount:app-system:controller"}),
		},
		"if the rule is unknown to this review, point at the guard's log": {
			finding: Finding{Rule: "policy", Mapping: "app", Subject: "bob", Configuration: vwc},
			exp:     "see the guard's log for this rule",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, Suggest(test.finding))
		})
	}
}
