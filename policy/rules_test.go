package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_ruleTable: every entry names its own rule, with a summary, a report
// category and, unless it is RuleNone, a review suggestion; Info and Rules
// answer from it in its order.
func Test_ruleTable(t *testing.T) {
	seen := map[Rule]bool{}
	for i, info := range ruleTable {
		assert.NotEmpty(t, info.Rule, "entry %d names no rule", i)
		assert.False(t, seen[info.Rule], "%q has two entries", info.Rule)
		seen[info.Rule] = true
		assert.NotEmpty(t, info.Summary, "%s has no summary", info.Rule)
		assert.NotEmpty(t, info.Category, "%s has no report category", info.Rule)
		// review lists every recorded finding with its suggestion; only
		// RuleNone, which nothing breaks, is never one.
		if info.Rule == RuleNone {
			assert.Nil(t, info.Suggest, "%s breaks nothing: review has nothing to suggest", info.Rule)
		} else {
			assert.NotNil(t, info.Suggest, "%s has no Suggest: webhook-guard review would print no fix for its findings", info.Rule)
		}
		assert.Equal(t, info.Rule, info.Rule.Info().Rule)
		assert.Equal(t, info.Rule, Rules()[i], "Rules is in table order")
	}
	assert.Len(t, Rules(), len(ruleTable))
	assert.Equal(t, RuleInfo{}, Rule("no-such-rule").Info())
}

// Test_Decision_ruleByPriority: a decision that breaks several rules is
// counted under the one first in the table.
func Test_Decision_ruleByPriority(t *testing.T) {
	tests := map[string]struct {
		violations []Rule
		exp        Rule
	}{
		"if not-owner and ca-mismatch are broken, count not-owner": {
			violations: []Rule{RuleCAMismatch, RuleNotOwner}, exp: RuleNotOwner,
		},
		"if ca-mismatch and ca-unavailable are broken, count ca-unavailable": {
			violations: []Rule{RuleCAMismatch, RuleCAUnavailable}, exp: RuleCAUnavailable,
		},
		"if policy-object and unmanaged are broken, count the one first in the table": {
			violations: []Rule{RuleUnmanaged, RuleAdmissionPolicyObject}, exp: RuleAdmissionPolicyObject,
		},
		"if nothing is broken, count none": {exp: RuleNone},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			d := Decision{}
			for _, r := range test.violations {
				d.Violations = append(d.Violations, Violation{Rule: r})
			}
			d.finish(guardapi.ModeEnforce, false)
			assert.Equal(t, test.exp, d.Rule)
		})
	}
}
