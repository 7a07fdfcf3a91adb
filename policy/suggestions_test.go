package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Test_RuleInfo_Suggest: each rule's suggestion, filled in with a finding's
// facts, names the change that makes the finding go away.
func Test_RuleInfo_Suggest(t *testing.T) {
	const vwc = "ValidatingWebhookConfiguration/app-webhooks"
	tests := map[string]struct {
		rule  Rule
		facts FindingFacts
		exp   string
	}{
		"if a service account is not a writer, name the serviceAccounts entry to add": {
			rule:  RuleNotOwner,
			facts: FindingFacts{Mapping: "app", Subject: "system:serviceaccount:app-system:controller", Configuration: vwc},
			exp:   "add app-system/controller to owners[app].writers.serviceAccounts (if system:serviceaccount:app-system:controller owns " + vwc + "), or stop it writing the configuration",
		},
		"if a user is not a writer, name the users entry to add": {
			rule:  RuleNotOwner,
			facts: FindingFacts{Mapping: "app", Subject: "alice@example.com", Configuration: vwc},
			exp:   `add "alice@example.com" to owners[app].writers.users (if alice@example.com owns ` + vwc + "), or stop it writing the configuration",
		},
		"if several mappings claim the configuration, ask to narrow all but one": {
			rule:  RuleAmbiguousOwner,
			facts: FindingFacts{Mapping: "a,b", Subject: "bob", Configuration: vwc},
			exp:   "the label selectors of mappings a,b all match " + vwc + ": narrow all but one",
		},
		"if the CA source could not be read, point at the source and the guard's RBAC": {
			rule:  RuleCAUnavailable,
			facts: FindingFacts{Mapping: "app", Subject: "bob", Configuration: vwc},
			exp:   "the owner's CA source could not be read when bob wrote caBundle: fix owners[app].ca or the guard's RBAC to read it",
		},
		"if a request wrote a foreign CA, name the second CA writer": {
			rule:  RuleCAMismatch,
			facts: FindingFacts{Mapping: "app", Subject: "bob", Configuration: vwc, ExpectedCA: "9f86d081884c7d65", FoundCA: "1b4f0e9851971998"},
			exp:   "the caBundle written by bob (CA 1b4f0e9851971998) is neither the owner's CA (9f86d081884c7d65) nor already in that entry; if that CA is the right one, point owners[app].ca at the source bob writes from; if bob is a second CA writer, make it use the owner's CA or stop it writing caBundle (it stays a writer of the rest of the configuration)",
		},
		"if a request wrote no usable CA, say the bundle was empty or invalid": {
			rule:  RuleCAMismatch,
			facts: FindingFacts{Mapping: "app", Subject: "bob", Configuration: vwc},
			exp:   "the caBundle written by bob (CA none: empty or invalid PEM) is neither the owner's CA (-) nor already in that entry; if that CA is the right one, point owners[app].ca at the source bob writes from; if bob is a second CA writer, make it use the owner's CA or stop it writing caBundle (it stays a writer of the rest of the configuration)",
		},
		"if the observer saw a foreign CA, name the field managers and point at the audit log for the user": {
			rule: RuleCAMismatch,
			facts: FindingFacts{Mapping: "app", Subject: ObservedSubjectPrefix + "helm", Configuration: vwc, ExpectedCA: "9f86d081884c7d65", FoundCA: "1b4f0e9851971998",
				Observed: true, FieldManagers: "helm (Apply, 2026-11-30T04:00:00Z)"},
			exp: "a caBundle not matching the owner's CA (9f86d081884c7d65) was observed on " + vwc + ", written by helm (found CA 1b4f0e9851971998; managedFields: helm (Apply, 2026-11-30T04:00:00Z)): make that client use the owner's CA (owners[app].ca) or stop it writing caBundle; review --audit-log names the user",
		},
		"if someone else changed a generated policy, point at the GuardConfig": {
			rule:  RuleAdmissionPolicyObject,
			facts: FindingFacts{Mapping: "(unmanaged)", Subject: "bob", Configuration: "ValidatingAdmissionPolicyBinding/webhook-guard-app"},
			exp:   "bob changed ValidatingAdmissionPolicyBinding/webhook-guard-app, which the policy shape generates: change the owner mappings in the GuardConfig instead, the guard regenerates it",
		},
		"if no mapping covers the configuration, ask for it to be added to its controller's mapping": {
			rule:  RuleUnmanaged,
			facts: FindingFacts{Mapping: "(unmanaged)", Subject: "bob", Configuration: vwc},
			exp:   "no mapping covers " + vwc + ": add it to the match of the mapping of the controller that owns it",
		},
		"if a writer went over its write budget, point at the loop": {
			rule:  RuleWriteBudget,
			facts: FindingFacts{Mapping: "app", Subject: "system:serviceaccount:app:controller", Configuration: vwc},
			exp:   "system:serviceaccount:app:controller changed the caBundle of " + vwc + " beyond owners[app].writeBudget: find why the owner's controller rewrites it in a loop; raise the budget only if the rate is legitimate",
		},
		"if a writer's caBundle did not verify what its endpoint served, point at the order of the rotation": {
			rule:  RuleServingUnverified,
			facts: FindingFacts{Mapping: "app", Subject: "system:serviceaccount:app:controller", Configuration: vwc},
			exp:   "system:serviceaccount:app:controller wrote a caBundle to " + vwc + " that its endpoint's certificate does not chain to: serve a leaf under the new CA before publishing a CA without the old one, or set owners[app].verifyServing: warn if this writer publishes first by design",
		},
		"if break-glass wrote, ask to confirm it was intended": {
			rule:  RuleBreakGlass,
			facts: FindingFacts{Mapping: "app", Subject: "admin", Configuration: vwc},
			exp:   "break-glass write by admin: confirm it was intended; break-glass is always allowed",
		},
	}
	covered := map[Rule]bool{}
	for name, test := range tests {
		covered[test.rule] = true
		t.Run(name, func(t *testing.T) {
			suggest := test.rule.Info().Suggest
			require.NotNil(t, suggest)
			assert.Equal(t, test.exp, suggest(test.facts))
		})
	}
	for _, r := range Rules() {
		if r.Info().Suggest != nil {
			assert.True(t, covered[r], "%s has a suggestion but no case here", r)
		}
	}
}
