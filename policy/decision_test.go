package policy

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Fixed fingerprints keep the expected messages below literal.
const (
	fpOwner   = "0123456789abcdef"
	fpForeign = "fedcba9876543210"
)

var (
	vNotOwner = Violation{
		Rule:   RuleNotOwner,
		Field:  "userInfo",
		Detail: `"system:serviceaccount:kube-system:intruder" is not a writer`,
		Hint:   "if it should own this configuration, add kube-system/intruder to owners[koordinator].writers.serviceAccounts",
	}
	vMismatch = Violation{
		Rule:     RuleCAMismatch,
		Field:    "webhooks[1].clientConfig.caBundle",
		Webhook:  "b.koord.io",
		Detail:   "the caBundle holds 1 certificate(s) that are not the owner's CA (from secret koordinator-system/webhook-certs)",
		Hint:     "write the owner's CA; if the owner's CA changed, update its source first",
		Expected: []string{fpOwner},
		Found:    []string{fpForeign},
	}
	vUnmanaged = Violation{
		Rule:   RuleUnmanaged,
		Detail: "no owner mapping covers this configuration",
		Hint:   "add it to the match of the mapping of the controller that owns it",
	}
)

// decision builds a decision the way Decide does: violations in the order
// they were found, then finish.
func decision(mapping string, mode guardapi.Mode, breakGlass, dryRun bool, violations ...Violation) Decision {
	d := Decision{
		Operation:  OperationUpdate,
		Kind:       KindValidating,
		Name:       "koord",
		Subject:    "system:serviceaccount:kube-system:intruder",
		DryRun:     dryRun,
		Mapping:    mapping,
		Mode:       mode,
		Violations: violations,
	}
	d.finish(mode, breakGlass)
	return d
}

func Test_Decision_Message(t *testing.T) {
	tests := map[string]struct {
		decision Decision
		exp      string
	}{
		"if a deny has two violations, name the request, mapping and mode, then every violation sorted by field": {
			decision: decision("koordinator", guardapi.ModeEnforce, false, false, vMismatch, vNotOwner),
			exp: `webhook-guard denied UPDATE of ValidatingWebhookConfiguration "koord" by "system:serviceaccount:kube-system:intruder" (mapping "koordinator", enforce); ` +
				`not-owner: userInfo: "system:serviceaccount:kube-system:intruder" is not a writer; hint: if it should own this configuration, add kube-system/intruder to owners[koordinator].writers.serviceAccounts; ` +
				`ca-mismatch: webhooks[1].clientConfig.caBundle (webhook "b.koord.io"): the caBundle holds 1 certificate(s) that are not the owner's CA (from secret koordinator-system/webhook-certs) [expected CA 0123456789abcdef, found fedcba9876543210]; hint: write the owner's CA; if the owner's CA changed, update its source first`,
		},
		"if the decision is audited, say it would deny": {
			decision: decision("audited", guardapi.ModeAudit, false, false, vNotOwner),
			exp: `webhook-guard would deny (audit mode) UPDATE of ValidatingWebhookConfiguration "koord" by "system:serviceaccount:kube-system:intruder" (mapping "audited", audit); ` +
				`not-owner: userInfo: "system:serviceaccount:kube-system:intruder" is not a writer; hint: if it should own this configuration, add kube-system/intruder to owners[koordinator].writers.serviceAccounts`,
		},
		"if the configuration is unmanaged, name no mapping": {
			decision: Decision{Operation: OperationCreate, Kind: KindMutating, Name: "x", Subject: "bob", Outcome: OutcomeAudit, Rule: RuleUnmanaged, Violations: []Violation{vUnmanaged}},
			exp: `webhook-guard would deny (audit mode) CREATE of MutatingWebhookConfiguration "x" by "bob"; ` +
				`unmanaged: no owner mapping covers this configuration; hint: add it to the match of the mapping of the controller that owns it`,
		},
		"if a break-glass subject breaks a rule, say it was allowed as break-glass": {
			decision: decision("shared,team-a", guardapi.ModeEnforce, true, false, Violation{Rule: RuleAmbiguousOwner, Field: "metadata.labels", Detail: "ambiguous"}),
			exp: `webhook-guard allowed break-glass UPDATE of ValidatingWebhookConfiguration "koord" by "system:serviceaccount:kube-system:intruder" (mapping "shared,team-a", enforce); ` +
				`ambiguous-owner: metadata.labels: ambiguous`,
		},
		"if a break-glass write broke no rule, return no message": {
			decision: decision("koordinator", guardapi.ModeEnforce, true, false),
			exp:      "",
		},
		"if nothing was broken, return no message": {
			decision: decision("koordinator", guardapi.ModeEnforce, false, false),
			exp:      "",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, test.decision.Message())
		})
	}
}

func Test_Violation_String(t *testing.T) {
	tests := map[string]struct {
		input Violation
		exp   string
	}{
		"if the violation names a field and a webhook, show both": {
			input: vMismatch,
			exp:   `ca-mismatch: webhooks[1].clientConfig.caBundle (webhook "b.koord.io"): the caBundle holds 1 certificate(s) that are not the owner's CA (from secret koordinator-system/webhook-certs) [expected CA 0123456789abcdef, found fedcba9876543210]; hint: write the owner's CA; if the owner's CA changed, update its source first`,
		},
		"if the violation names a field only, show the field": {
			input: Violation{Rule: RuleCAMismatch, Field: "webhooks[0].clientConfig.caBundle", Detail: "d"},
			exp:   `ca-mismatch: webhooks[0].clientConfig.caBundle: d`,
		},
		"if the violation names no field, show rule and detail": {
			input: Violation{Rule: RuleUnmanaged, Detail: "d"},
			exp:   `unmanaged: d`,
		},
		"if only expected fingerprints are known, say none were found": {
			input: Violation{Rule: RuleCAMismatch, Detail: "d", Expected: []string{fpOwner, fpForeign}},
			exp:   `ca-mismatch: d [expected CA 0123456789abcdef,fedcba9876543210, found none]`,
		},
		"if only found fingerprints are known, say none were expected": {
			input: Violation{Rule: RuleCAMismatch, Detail: "d", Found: []string{fpForeign}, Hint: "h"},
			exp:   `ca-mismatch: d [expected CA none, found fedcba9876543210]; hint: h`,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, test.input.String())
		})
	}
}

func Test_Decision_Warnings(t *testing.T) {
	// 46 bytes of prefix, rule and "x", then two-byte runes: a cut at byte
	// 247 would fall inside a rune.
	longUTF8 := Violation{Rule: RuleUnmanaged, Detail: "x" + strings.Repeat("é", 200)}

	tests := map[string]struct {
		decision Decision
		exp      []string
	}{
		"if the decision is audited, return one warning per violation, sorted by field": {
			decision: decision("audited", guardapi.ModeAudit, false, false, vNotOwner, Violation{Rule: RuleCAMismatch, Field: "webhooks[0].clientConfig.caBundle", Detail: "d"}),
			exp: []string{
				`webhook-guard (audit) would deny: not-owner: userInfo: "system:serviceaccount:kube-system:intruder" is not a writer; hint: if it should own this configuration, add kube-system/intruder to owners[koordinator].writers.serviceAccounts`,
				`webhook-guard (audit) would deny: ca-mismatch: webhooks[0].clientConfig.caBundle: d`,
			},
		},
		"if a warning is longer than 250 bytes, cut it on a rune boundary so kube-apiserver keeps it": {
			decision: decision("audited", guardapi.ModeAudit, false, false, longUTF8),
			exp:      []string{"webhook-guard (audit) would deny: unmanaged: x" + strings.Repeat("é", 100) + "..."},
		},
		"if a break-glass subject writes a guarded configuration, name the mapping and say it is recorded": {
			decision: decision("koordinator", guardapi.ModeEnforce, true, false),
			exp:      []string{`webhook-guard break-glass: "system:serviceaccount:kube-system:intruder" wrote ValidatingWebhookConfiguration "koord" owned by mapping "koordinator"; this write is recorded`},
		},
		"if a break-glass subject writes an unmanaged configuration, say no mapping covers it": {
			decision: Decision{Kind: KindMutating, Name: "unrelated", Subject: "kubernetes-admin", Outcome: OutcomeBreakGlass, Rule: RuleBreakGlass},
			exp:      []string{`webhook-guard break-glass: "kubernetes-admin" wrote MutatingWebhookConfiguration "unrelated" that no mapping covers; this write is recorded`},
		},
		"if a break-glass subject's write broke a rule, warn about the write and about what it bypassed": {
			decision: decision("shared,team-a", guardapi.ModeEnforce, true, false, Violation{Rule: RuleAmbiguousOwner, Field: "metadata.labels", Detail: "ambiguous"}),
			exp: []string{
				`webhook-guard break-glass: "system:serviceaccount:kube-system:intruder" wrote ValidatingWebhookConfiguration "koord" owned by mapping "shared,team-a"; this write is recorded`,
				`webhook-guard break-glass: bypassed ambiguous-owner: metadata.labels: ambiguous`,
			},
		},
		"if the request is denied, return no warnings: the message says it all": {
			decision: decision("koordinator", guardapi.ModeEnforce, false, false, vNotOwner),
			exp:      nil,
		},
		"if the request is allowed, return no warnings": {
			decision: decision("koordinator", guardapi.ModeEnforce, false, false),
			exp:      nil,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := test.decision.Warnings()
			assert.Equal(t, test.exp, got)
			for _, w := range got {
				assert.LessOrEqual(t, len(w), maxWarningLen)
				assert.True(t, utf8.ValidString(w))
			}
		})
	}
}

func Test_truncate(t *testing.T) {
	tests := map[string]struct {
		input string
		exp   string
	}{
		"if the text fits, return it unchanged": {
			input: strings.Repeat("a", 250),
			exp:   strings.Repeat("a", 250),
		},
		"if ASCII text is one byte too long, cut it to 247 bytes and an ellipsis": {
			input: strings.Repeat("a", 251),
			exp:   strings.Repeat("a", 247) + "...",
		},
		"if the cut falls inside a three-byte rune, cut before the rune": {
			input: "ab" + strings.Repeat("€", 100),
			exp:   "ab" + strings.Repeat("€", 81) + "...",
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			got := truncate(test.input)
			assert.Equal(t, test.exp, got)
			assert.True(t, utf8.ValidString(got))
		})
	}
}

func Test_Decision_AuditAnnotations(t *testing.T) {
	tests := map[string]struct {
		decision Decision
		exp      map[string]string
	}{
		"if the request is denied, annotate decision, rule, mapping and every violation": {
			decision: decision("koordinator", guardapi.ModeEnforce, false, false, vMismatch, vNotOwner),
			exp: map[string]string{
				"decision":   "deny",
				"rule":       "not-owner",
				"mapping":    "koordinator",
				"violations": vNotOwner.String() + " | " + vMismatch.String(),
			},
		},
		"if a break-glass subject writes, annotate it without violations": {
			decision: decision("koordinator", guardapi.ModeEnforce, true, false),
			exp:      map[string]string{"decision": "break-glass", "rule": "break-glass", "mapping": "koordinator"},
		},
		"if an unmanaged write is audited, annotate it without a mapping": {
			decision: Decision{Outcome: OutcomeAudit, Rule: RuleUnmanaged, Violations: []Violation{vUnmanaged}},
			exp: map[string]string{
				"decision":   "audit",
				"rule":       "unmanaged",
				"violations": "unmanaged: no owner mapping covers this configuration; hint: add it to the match of the mapping of the controller that owns it",
			},
		},
		"if nothing was broken, annotate nothing": {
			decision: decision("koordinator", guardapi.ModeEnforce, false, false),
			exp:      nil,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, test.decision.AuditAnnotations())
		})
	}
}

func Test_Decision_finish(t *testing.T) {
	unavailable := Violation{Rule: RuleCAUnavailable, Field: "webhooks[0].clientConfig.caBundle"}
	mismatch0 := Violation{Rule: RuleCAMismatch, Field: "webhooks[0].clientConfig.caBundle"}
	mismatch1 := Violation{Rule: RuleCAMismatch, Field: "webhooks[1].clientConfig.caBundle"}
	ambiguous := Violation{Rule: RuleAmbiguousOwner, Field: "metadata.labels"}
	notOwner := Violation{Rule: RuleNotOwner, Field: "userInfo"}

	tests := map[string]struct {
		mode          guardapi.Mode
		breakGlass    bool
		dryRun        bool
		violations    []Violation
		expViolations []Violation
		expOutcome    Outcome
		expRule       Rule
		expRecord     bool
	}{
		"if there are no violations, allow and do not record": {
			mode: guardapi.ModeEnforce, expOutcome: OutcomeAllow, expRule: RuleNone,
		},
		"if violations come unsorted, sort them by field then rule and count the decision under not-owner": {
			mode:          guardapi.ModeEnforce,
			violations:    []Violation{mismatch1, unavailable, notOwner, mismatch0},
			expViolations: []Violation{notOwner, mismatch0, unavailable, mismatch1},
			expOutcome:    OutcomeDeny, expRule: RuleNotOwner, expRecord: true,
		},
		"if ca-unavailable and ca-mismatch are broken, count the decision under ca-unavailable": {
			mode:          guardapi.ModeAudit,
			violations:    []Violation{mismatch1, unavailable},
			expViolations: []Violation{unavailable, mismatch1},
			expOutcome:    OutcomeAudit, expRule: RuleCAUnavailable, expRecord: true,
		},
		"if ambiguous-owner and ca-mismatch are broken, count the decision under ambiguous-owner": {
			mode:          guardapi.ModeEnforce,
			violations:    []Violation{mismatch0, ambiguous},
			expViolations: []Violation{ambiguous, mismatch0},
			expOutcome:    OutcomeDeny, expRule: RuleAmbiguousOwner, expRecord: true,
		},
		"if an enforced violation is a dry run, deny but do not record": {
			mode: guardapi.ModeEnforce, dryRun: true,
			violations:    []Violation{notOwner},
			expViolations: []Violation{notOwner},
			expOutcome:    OutcomeDeny, expRule: RuleNotOwner,
		},
		"if the subject is break-glass, allow as break-glass and record": {
			mode: guardapi.ModeEnforce, breakGlass: true,
			expOutcome: OutcomeBreakGlass, expRule: RuleBreakGlass, expRecord: true,
		},
		"if the subject is break-glass and broke a rule, count it as break-glass and keep the violation": {
			mode: guardapi.ModeEnforce, breakGlass: true,
			violations:    []Violation{ambiguous},
			expViolations: []Violation{ambiguous},
			expOutcome:    OutcomeBreakGlass, expRule: RuleBreakGlass, expRecord: true,
		},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			d := Decision{DryRun: test.dryRun, Violations: test.violations}
			d.finish(test.mode, test.breakGlass)
			assert.Equal(t, test.expViolations, d.Violations)
			assert.Equal(t, test.expOutcome, d.Outcome)
			assert.Equal(t, test.expRule, d.Rule)
			assert.Equal(t, test.expRecord, d.Record)
		})
	}
}

func Test_joinShort(t *testing.T) {
	tests := map[string]struct {
		input []string
		exp   string
	}{
		"if there are no fingerprints, say none":   {input: nil, exp: "none"},
		"if there is one fingerprint, return it":   {input: []string{"0123456789abcdef"}, exp: "0123456789abcdef"},
		"if there are two, join them with a comma": {input: []string{"0123456789abcdef", "fedcba9876543210"}, exp: "0123456789abcdef,fedcba9876543210"},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, test.exp, joinShort(test.input))
		})
	}
}
