package auditlog

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Test_Read reads an audit log holding each kind of decision the
// guard leaves there, stages and resources that do not count, and lines that
// are not audit events.
func Test_Read(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "audit.log"))
	require.NoError(t, err)
	defer f.Close()
	found, sum, err := Read(f)
	require.NoError(t, err)
	assert.Equal(t, Summary{Events: 7, Decisions: 5, Malformed: 2, MalformedLines: []int{3, 9}}, sum,
		"a line that is not JSON and a JSON object that is not an Event are counted with their line numbers; the rest is read")
	vwc, mwc := "ValidatingWebhookConfiguration/", "MutatingWebhookConfiguration/"
	assert.Equal(t, []Decision{
		{Mapping: "app", Subject: "system:serviceaccount:app-system:replica-1", Rule: "ca-mismatch", Decision: "audit", Configuration: vwc + "app-webhooks",
			Count: 2, FirstSeen: "2026-11-30T04:00:00Z", LastSeen: "2026-11-30T04:05:00Z"},
		{Mapping: "enforced", Subject: "system:serviceaccount:other-system:intruder", Rule: "not-owner", Decision: "deny", Configuration: vwc + "enforced-webhooks",
			Count: 1, FirstSeen: "2026-11-30T04:01:00Z", LastSeen: "2026-11-30T04:01:00Z"},
		{Mapping: "app", Subject: "system:serviceaccount:app-system:app-controller", Rule: "ca-mismatch", Decision: "audit", Configuration: mwc + "app-webhooks",
			FoundCA: "aaaabbbbccccdddd", Count: 1, FirstSeen: "2026-11-30T04:02:00Z", LastSeen: "2026-11-30T04:02:00Z"},
		{Mapping: "app", Subject: "kubernetes-admin", Rule: "break-glass", Decision: "break-glass", Configuration: vwc + "app-webhooks",
			Count: 1, FirstSeen: "2026-11-30T04:03:00Z", LastSeen: "2026-11-30T04:03:00Z"},
	}, found)
	assert.Equal(t, "2 malformed line(s) skipped (not audit.k8s.io/v1 Events): line 3, 9", sum.malformedNote())
}

// Test_vapDecision: a policy-shape message is counted under the rule it
// names; one naming none is counted as "policy".
func Test_vapDecision(t *testing.T) {
	for msg, want := range map[string]string{
		`webhook-guard denied UPDATE ... (mapping "app", enforce, policy shape); not-owner: userInfo: "x" is not a writer`:                   "not-owner",
		`webhook-guard denied UPDATE ... (mapping "app", enforce, policy shape); ca-mismatch: the caBundle of webhook(s) a is not ...`:       "ca-mismatch",
		`webhook-guard denied UPDATE ... (mapping "app", enforce, policy shape); ca-unavailable: the caBundle of webhook(s) a cannot be ...`: "ca-unavailable",
		`webhook-guard: something else`: "policy",
	} {
		assert.Equal(t, want, vapDecision(Decision{}, "app", "deny", msg).Rule, msg)
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
			policy: "webhook-guard-app-ca", message: `webhook-guard denied UPDATE of ... (mapping "app", enforce, policy shape); ca-mismatch: ...`, exp: "app", ok: true,
		},
		"if a mapping's name ends like a suffix, its message still names it": {
			policy: "webhook-guard-team-ca-selected", message: `webhook-guard (audit) would deny UPDATE of ... (mapping "team-ca", audit, policy shape); not-owner: ...`, exp: "team-ca", ok: true,
		},
		"if kube-apiserver used the static fallback message, it names the mapping too": {
			policy: "webhook-guard-app-selected-ca", message: `webhook-guard: ca-mismatch (mapping "app"): certificate(s) not in the owner's CA set`, exp: "app", ok: true,
		},
		"if the message names no mapping, the policy's name does": {
			policy: "webhook-guard-app", message: "something else", exp: "app", ok: true,
		},
		"if another tool's policy denied, there is no mapping": {
			policy: "kyverno-policy", message: `(mapping "app", enforce, policy shape)`,
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

// Test_Read_overLongLine: a line longer than 1 MiB is skipped
// unread and counted with its line number, even when it is an audit event
// with a decision, and the lines after it are read.
func Test_Read_overLongLine(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "audit.log"))
	require.NoError(t, err)
	event, _, _ := strings.Cut(string(data), "\n") // a ca-mismatch audit decision
	require.True(t, strings.HasSuffix(event, "}"))
	padded := strings.TrimSuffix(event, "}") + `,"padding":"` + strings.Repeat("x", maxAuditLineBytes) + `"}`
	log := event + "\n" + padded + "\n" + event + "\n"

	found, sum, err := Read(strings.NewReader(log))
	require.NoError(t, err)
	assert.Equal(t, Summary{Events: 2, Decisions: 2, TooLong: 1, TooLongLines: []int{2}}, sum)
	require.Len(t, found, 1)
	assert.Equal(t, int64(2), found[0].Count, "the events before and after the long line are both read")
	assert.Equal(t, []string{"1 line(s) longer than 1 MiB skipped unread (audit events are far smaller): line 2"}, sum.Notes())
}

// Test_readBoundedLine: a line up to the limit (without its newline) is
// returned whole, a longer one is cut and its rest discarded, across reads
// of the reader's buffer.
func Test_readBoundedLine(t *testing.T) {
	const limit = 20
	in := "short\n" + strings.Repeat("a", limit) + "\n" + strings.Repeat("b", limit+1) + "\n" + strings.Repeat("c", 100) + "\nlast"
	br := bufio.NewReaderSize(strings.NewReader(in), 16) // smaller than a line: reads span buffers
	type result struct {
		line string
		cut  bool
	}
	var got []result
	var buf []byte
	for {
		var cut bool
		var err error
		buf, cut, err = readBoundedLine(br, limit, buf)
		got = append(got, result{string(buf), cut})
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	assert.Equal(t, []result{
		{"short\n", false},
		{strings.Repeat("a", limit) + "\n", false},
		{"", true},
		{"", true},
		{"last", false},
	}, got)
}
