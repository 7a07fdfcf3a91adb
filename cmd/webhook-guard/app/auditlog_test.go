package app

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Test_readAuditLog reads an audit log holding each kind of decision the
// guard leaves there, stages and resources that do not count, and lines that
// are not audit events.
func Test_readAuditLog(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "review", "audit.log"))
	require.NoError(t, err)
	defer f.Close()
	found, sum, err := readAuditLog(f)
	require.NoError(t, err)
	assert.Equal(t, AuditLogSummary{Events: 7, Decisions: 5, Malformed: 2, MalformedLines: []int{3, 9}}, sum,
		"a line that is not JSON and a JSON object that is not an Event are counted with their line numbers; the rest is read")
	vwc, mwc := "ValidatingWebhookConfiguration/", "MutatingWebhookConfiguration/"
	assert.Equal(t, []ReviewFinding{
		{Mapping: "app", Subject: "system:serviceaccount:app-system:replica-1", Rule: "ca-mismatch", Decision: "audit", Configuration: vwc + "app-webhooks",
			Count: 2, FirstSeen: "2026-11-30T04:00:00Z", LastSeen: "2026-11-30T04:05:00Z", Origin: OriginAuditLog},
		{Mapping: "enforced", Subject: "system:serviceaccount:other-system:intruder", Rule: "not-owner", Decision: "deny", Configuration: vwc + "enforced-webhooks",
			Count: 1, FirstSeen: "2026-11-30T04:01:00Z", LastSeen: "2026-11-30T04:01:00Z", Origin: OriginAuditLog},
		{Mapping: "app", Subject: "system:serviceaccount:app-system:app-controller", Rule: "ca-mismatch", Decision: "audit", Configuration: mwc + "app-webhooks",
			FoundCA: "aaaabbbbccccdddd", Count: 1, FirstSeen: "2026-11-30T04:02:00Z", LastSeen: "2026-11-30T04:02:00Z", Origin: OriginAuditLog},
		{Mapping: "app", Subject: "kubernetes-admin", Rule: "break-glass", Decision: "break-glass", Configuration: vwc + "app-webhooks",
			Count: 1, FirstSeen: "2026-11-30T04:03:00Z", LastSeen: "2026-11-30T04:03:00Z", Origin: OriginAuditLog},
	}, found)
	assert.Equal(t, "2 malformed line(s) skipped (not audit.k8s.io/v1 Events): line 3, 9", sum.malformedNote())
}

// Test_vapFinding: a policy-shape message is counted under the rule it
// names; one naming none is counted as "policy".
func Test_vapFinding(t *testing.T) {
	for msg, want := range map[string]string{
		`webhook-guard denied UPDATE ... (mapping "app", enforce, policy mode); not-owner: userInfo: "x" is not a writer`:                   "not-owner",
		`webhook-guard denied UPDATE ... (mapping "app", enforce, policy mode); ca-mismatch: the caBundle of webhook(s) a is not ...`:       "ca-mismatch",
		`webhook-guard denied UPDATE ... (mapping "app", enforce, policy mode); ca-unavailable: the caBundle of webhook(s) a cannot be ...`: "ca-unavailable",
		`webhook-guard: something else`: "policy",
	} {
		assert.Equal(t, want, vapFinding(ReviewFinding{}, "app", "deny", msg).Rule, msg)
	}
}

// Test_mappingOfPolicy: a mapping has several generated policies (-selected,
// -ca), so the mapping its message names decides; a message without one falls
// back to the policy's name, and a policy the guard did not generate is none.
func Test_mappingOfPolicy(t *testing.T) {
	tests := map[string]struct {
		policy, message, exp string
		ok                   bool
	}{
		"if the CA policy of mapping app denied, the finding is app's": {
			policy: "webhook-guard-app-ca", message: `webhook-guard denied UPDATE of ... (mapping "app", enforce, policy mode); ca-mismatch: ...`, exp: "app", ok: true,
		},
		"if a mapping's name ends like a suffix, its message still names it": {
			policy: "webhook-guard-team-ca-selected", message: `webhook-guard (audit) would deny UPDATE of ... (mapping "team-ca", audit, policy mode); not-owner: ...`, exp: "team-ca", ok: true,
		},
		"if kube-apiserver used the static fallback message, it names the mapping too": {
			policy: "webhook-guard-app-selected-ca", message: `webhook-guard: ca-mismatch (mapping "app"): certificate(s) not in the owner's CA set`, exp: "app", ok: true,
		},
		"if the message names no mapping, the policy's name does": {
			policy: "webhook-guard-app", message: "something else", exp: "app", ok: true,
		},
		"if another tool's policy denied, there is no mapping": {
			policy: "kyverno-policy", message: `(mapping "app", enforce, policy mode)`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := mappingOfPolicy(test.policy, test.message)
			assert.Equal(t, test.ok, ok)
			assert.Equal(t, test.exp, got)
		})
	}
}
