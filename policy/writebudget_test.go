package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_Decision_ExceedWriteBudget: an allowed writer's change beyond its
// budget is refused in enforce mode (webhook answers it with 429) and a recorded would-deny in audit mode,
// with the retry hint rounded up to whole seconds (at least one).
func Test_Decision_ExceedWriteBudget(t *testing.T) {
	tests := map[string]struct {
		mode       guardapi.Mode
		dryRun     bool
		retryAfter time.Duration
		outcome    Outcome
		retry      int32
		record     bool
	}{
		"enforce refuses":                 {mode: guardapi.ModeEnforce, retryAfter: 1500 * time.Millisecond, outcome: OutcomeDeny, retry: 2, record: true},
		"audit allows and records":        {mode: guardapi.ModeAudit, retryAfter: 40 * time.Second, outcome: OutcomeAudit, retry: 40, record: true},
		"a retry under a second is one":   {mode: guardapi.ModeEnforce, retryAfter: time.Millisecond, outcome: OutcomeDeny, retry: 1, record: true},
		"a dry run is refused unrecorded": {mode: guardapi.ModeEnforce, dryRun: true, retryAfter: time.Second, outcome: OutcomeDeny, retry: 1},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			d := Decision{Mapping: "app", Mode: test.mode, Outcome: OutcomeAllow, Rule: RuleNone, DryRun: test.dryRun}
			d.ExceedWriteBudget(30, test.retryAfter)
			assert.Equal(t, test.outcome, d.Outcome)
			assert.Equal(t, RuleWriteBudget, d.Rule)
			assert.Equal(t, test.retry, d.RetryAfterSeconds)
			assert.Equal(t, test.record, d.Record)
			assert.Contains(t, d.Violations[0].String(), "more than 30 caBundle-changing writes by this writer to this configuration within a minute (owners[app].writeBudget.perMinute)")
		})
	}
}
