package policy

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Rule names a broken rule; values are metric label values. Each has its
// entry in the rule table (rules.go).
type Rule string

const (
	RuleNone Rule = "none"
	// RuleNotOwner: the subject is neither a writer nor break-glass.
	RuleNotOwner Rule = "not-owner"
	// RuleCAMismatch: a written caBundle is invalid, emptied, or holds a
	// certificate outside the owner's CA set, or a new entry has none (and
	// no fill by cainjector is coming).
	RuleCAMismatch Rule = "ca-mismatch"
	// RuleCAUnavailable: a caBundle was written but the owner's CA source
	// could not be read; caBundle changes fail closed.
	RuleCAUnavailable Rule = "ca-unavailable"
	// RuleAmbiguousOwner: label selectors of two mappings matched one
	// configuration; single ownership cannot be decided.
	RuleAmbiguousOwner Rule = "ambiguous-owner"
	// RuleUnmanaged: no mapping covers the configuration (unmanaged: audit).
	RuleUnmanaged Rule = "unmanaged"
	// RuleBreakGlass: a break-glass subject wrote a guarded configuration.
	RuleBreakGlass Rule = "break-glass"
	// RuleWriteBudget: a writer changed a caBundle beyond the mapping's
	// writeBudget; decided by the static shape's handler (it is state across
	// requests), never by Decide.
	RuleWriteBudget Rule = "write-budget"
	// RuleServingUnverified: a writer's caBundle does not verify the
	// certificate the entry's endpoint served at the guard's last probe,
	// under a mapping with verifyServing: deny (static shape).
	RuleServingUnverified Rule = "serving-unverified"
)

// Outcome is what happens to the request; values are metric label values.
type Outcome string

const (
	// OutcomeAllow: nothing was broken.
	OutcomeAllow Outcome = "allow"
	// OutcomeDeny: a rule was broken in enforce mode; the request is rejected.
	OutcomeDeny Outcome = "deny"
	// OutcomeAudit: a rule was broken in audit mode; allowed with a warning.
	OutcomeAudit Outcome = "audit"
	// OutcomeBreakGlass: a break-glass subject; allowed with a warning.
	OutcomeBreakGlass Outcome = "break-glass"
)

// Violation is one broken rule.
type Violation struct {
	Rule Rule `json:"rule"`
	// Field is the path the violation is about.
	Field string `json:"field,omitempty"`
	// Webhook is the webhooks[] entry name, for caBundle rules.
	Webhook string `json:"webhook,omitempty"`
	// Detail says what is wrong.
	Detail string `json:"detail"`
	// Hint says how to fix it.
	Hint string `json:"hint,omitempty"`
	// Expected and Found are short CA fingerprints, for ca-mismatch.
	Expected []string `json:"expected,omitempty"`
	Found    []string `json:"found,omitempty"`
	// Summary, when set, replaces Detail where space is short (warnings).
	Summary string `json:"-"`
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(string(v.Rule))
	b.WriteString(": ")
	if v.Field != "" {
		b.WriteString(v.Field)
		if v.Webhook != "" {
			fmt.Fprintf(&b, " (webhook %q)", v.Webhook)
		}
		b.WriteString(": ")
	}
	b.WriteString(v.Detail)
	if v.Expected != nil || v.Found != nil {
		fmt.Fprintf(&b, " [expected CA %s, found %s]", joinShort(v.Expected), joinShort(v.Found))
	}
	if v.Hint != "" {
		b.WriteString("; hint: ")
		b.WriteString(v.Hint)
	}
	return b.String()
}

// Decision is the verdict on one request.
type Decision struct {
	Operation Operation   `json:"operation"`
	Kind      GuardedKind `json:"kind"`
	Name      string      `json:"name"`
	Subject   string      `json:"subject"`
	DryRun    bool        `json:"dryRun,omitempty"`
	// Mapping is the owning mapping's name; empty when unmanaged.
	Mapping string `json:"mapping,omitempty"`
	// Mode is the effective mode; empty when unmanaged.
	Mode    guardapi.Mode `json:"mode,omitempty"`
	Outcome Outcome       `json:"outcome"`
	// Rule is the primary broken rule (RuleNone when none), the label the
	// decision is counted under.
	Rule       Rule        `json:"rule"`
	Violations []Violation `json:"violations,omitempty"`
	// Notices are warnings that are no violation: the write breaks no
	// rule, but the writer should know (a caBundle that does not verify
	// what its endpoint served at the last probe). kubectl prints them
	// whatever the outcome.
	Notices []string `json:"notices,omitempty"`
	// Changes are the caBundle writes the request makes.
	Changes []BundleChange `json:"-"`
	// Record says whether the decision must be recorded: every would-deny,
	// deny, break-glass and audited unmanaged write, never a dry run.
	Record bool `json:"record"`
	// Observed marks a verdict on a change the observer saw after the fact
	// rather than a request the guard answered (Input.Observed).
	Observed bool `json:"observed,omitempty"`
	// FieldManagers own the changed caBundles, for an observed change.
	FieldManagers []FieldManager `json:"fieldManagers,omitempty"`
	// Write is Input.Write: what the records de-duplicate on.
	Write string `json:"-"`
	// RetryAfterSeconds is when a write refused for its write budget may
	// be retried.
	RetryAfterSeconds int32 `json:"retryAfterSeconds,omitempty"`
}

// newDecision starts the decision on a request with what identifies it, the
// same for a webhook configuration and a generated policy object.
func newDecision(op Operation, kind GuardedKind, name string, user User, dryRun bool) Decision {
	return Decision{Operation: op, Kind: kind, Name: name, Subject: user.Username, DryRun: dryRun}
}

// Allowed reports whether the request goes through.
func (d *Decision) Allowed() bool { return d.Outcome != OutcomeDeny }

// HasRule reports whether the decision broke rule.
func (d *Decision) HasRule(rule Rule) bool {
	for _, v := range d.Violations {
		if v.Rule == rule {
			return true
		}
	}
	return false
}

// ExceedWriteBudget turns a decision that allowed a writer's caBundle
// change into a refusal for its write budget: denied in enforce mode,
// would-deny (allowed, warned, recorded) in audit mode.
func (d *Decision) ExceedWriteBudget(perMinute int32, retryAfter time.Duration) {
	d.RetryAfterSeconds = int32(max(1, math.Ceil(retryAfter.Seconds())))
	d.Violations = append(d.Violations, Violation{
		Rule:  RuleWriteBudget,
		Field: "webhooks[].clientConfig.caBundle",
		Detail: fmt.Sprintf("more than %d caBundle-changing writes by this writer to this configuration within a minute (owners[%s].writeBudget.perMinute)",
			perMinute, d.Mapping),
		Hint: fmt.Sprintf("retry after %ds; if the owner's controller writes caBundle in a loop, fix the loop", d.RetryAfterSeconds),
	})
	d.finish(d.Mode, false)
}

// FailServing turns a decision that allowed a writer's caBundle change into
// a refusal because the new caBundle of each of these entries does not
// verify what its endpoint served at the last probe: denied in enforce
// mode, would-deny in audit mode.
func (d *Decision) FailServing(unverified []ServingFailure) {
	for _, u := range unverified {
		d.Violations = append(d.Violations, Violation{
			Rule:    RuleServingUnverified,
			Field:   u.Change.Field(),
			Webhook: u.Change.Webhook,
			Detail:  fmt.Sprintf("the new caBundle does not verify the certificate the entry's endpoint served at the last probe (%s) (owners[%s].verifyServing: deny)", u.Detail, d.Mapping),
			Hint:    "serve a leaf under the new CA first, or publish old and new CA together; kube-apiserver's calls to this entry would fail TLS",
			Summary: fmt.Sprintf("caBundle of %q does not verify what its endpoint served (%s)", u.Change.Webhook, u.Detail),
		})
	}
	d.finish(d.Mode, false)
}

// Message is the full, actionable explanation returned with a denial.
func (d *Decision) Message() string {
	if len(d.Violations) == 0 {
		return ""
	}
	var b strings.Builder
	verb := "denied"
	switch {
	case d.Observed && d.Outcome == OutcomeAudit:
		verb = "observed (audit mode would deny)"
	case d.Observed:
		verb = "observed (enforce mode denies)"
	case d.Outcome == OutcomeAudit:
		verb = "would deny (audit mode)"
	case d.Outcome == OutcomeBreakGlass:
		verb = "allowed break-glass"
	}
	fmt.Fprintf(&b, "webhook-guard %s %s of %s %q by %q", verb, d.Operation, d.Kind, d.Name, d.Subject)
	if d.Mapping != "" {
		fmt.Fprintf(&b, " (mapping %q, %s)", d.Mapping, d.Mode)
	}
	shown, more := listed(d.Violations)
	for _, v := range shown {
		b.WriteString("; ")
		b.WriteString(v.String())
	}
	if more > 0 {
		fmt.Fprintf(&b, "; and %d more violation(s) of the same kind not listed", more)
	}
	return b.String()
}

// MaxListedViolations bounds the violations a message, the warnings and the
// audit annotations list: a hostile 1,000-entry configuration must not turn
// into a 300 KB denial, 1,000 warnings or a 300 KB audit log line. The
// record keeps them all.
const MaxListedViolations = 10

// listed is the violations to show and how many are left out.
func listed(vs []Violation) ([]Violation, int) {
	if len(vs) <= MaxListedViolations {
		return vs, 0
	}
	return vs[:MaxListedViolations], len(vs) - MaxListedViolations
}

// maxWarningLen keeps each warning under kube-apiserver's truncation limit
// for webhook warnings, so kubectl prints it whole.
const maxWarningLen = 250

// Warnings are what kubectl prints for an allowed request: the rules it
// broke (audit, break-glass) and the decision's notices.
func (d *Decision) Warnings() []string {
	out := d.violationWarnings()
	for _, n := range d.Notices {
		out = append(out, truncate(n))
	}
	return out
}

// violationWarnings are the warnings of the rules an allowed request broke.
func (d *Decision) violationWarnings() []string {
	var prefix string
	switch d.Outcome {
	case OutcomeAudit:
		prefix = "webhook-guard (audit) would deny: "
	case OutcomeBreakGlass:
		prefix = "webhook-guard break-glass: "
	case OutcomeAllow, OutcomeDeny:
	}
	if prefix == "" {
		return nil // only an audited or break-glass write warns of the rules it broke
	}
	if d.Rule == RuleBreakGlass {
		owner := fmt.Sprintf("owned by mapping %q", d.Mapping)
		if d.Mapping == "" {
			owner = "that no mapping covers"
		}
		out := []string{truncate(fmt.Sprintf("%s%q wrote %s %q %s; this write is recorded", prefix, d.Subject, d.Kind, d.Name, owner))}
		shown, more := listed(d.Violations)
		for _, v := range shown {
			out = append(out, warning(prefix+"bypassed ", v))
		}
		return appendMore(out, prefix, more)
	}
	shown, more := listed(d.Violations)
	out := make([]string, 0, len(shown)+1)
	for _, v := range shown {
		out = append(out, warning(prefix, v))
	}
	return appendMore(out, prefix, more)
}

func appendMore(out []string, prefix string, more int) []string {
	if more > 0 {
		out = append(out, fmt.Sprintf("%sand %d more violation(s) not listed", prefix, more))
	}
	return out
}

// warning fits a violation into one warning: whole if it fits, else without
// its hint (the denial message and the record keep it), else cut.
func warning(prefix string, v Violation) string {
	if w := prefix + v.String(); len(w) <= maxWarningLen {
		return w
	}
	v.Hint = ""
	if w := prefix + v.String(); len(w) <= maxWarningLen || v.Summary == "" {
		return truncate(w)
	}
	v.Detail = v.Summary
	return truncate(prefix + v.String())
}

// truncate cuts on a rune boundary: kube-apiserver drops a warning that is
// not valid UTF-8 instead of showing it.
func truncate(s string) string {
	if len(s) <= maxWarningLen {
		return s
	}
	cut := maxWarningLen - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// AuditAnnotations land in kube-apiserver's audit log (prefixed there with
// the webhook's name).
func (d *Decision) AuditAnnotations() map[string]string {
	if d.Outcome == OutcomeAllow && d.Rule == RuleNone {
		return nil
	}
	a := map[string]string{"decision": string(d.Outcome), "rule": string(d.Rule)}
	if d.Mapping != "" {
		a["mapping"] = d.Mapping
	}
	if len(d.Violations) > 0 {
		shown, more := listed(d.Violations)
		rules := make([]string, 0, len(shown)+1)
		for _, v := range shown {
			rules = append(rules, v.String())
		}
		if more > 0 {
			rules = append(rules, fmt.Sprintf("and %d more", more))
		}
		a["violations"] = strings.Join(rules, " | ")
	}
	return a
}

func (d *Decision) finish(mode guardapi.Mode, breakGlass bool) {
	sort.SliceStable(d.Violations, func(i, j int) bool {
		a, b := d.Violations[i], d.Violations[j]
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Rule < b.Rule
	})
	d.Rule = RuleNone
	for _, v := range d.Violations {
		if d.Rule == RuleNone || v.Rule.priority() < d.Rule.priority() {
			d.Rule = v.Rule
		}
	}
	switch {
	case breakGlass:
		// Counted under break-glass whatever else it broke: the violations
		// stay listed in the record and the warnings.
		d.Outcome, d.Rule = OutcomeBreakGlass, RuleBreakGlass
	case len(d.Violations) == 0:
		d.Outcome = OutcomeAllow
	case mode == guardapi.ModeEnforce:
		d.Outcome = OutcomeDeny
	default:
		d.Outcome = OutcomeAudit
	}
	d.Record = d.Outcome != OutcomeAllow && !d.DryRun
}

func joinShort(fps []string) string {
	if len(fps) == 0 {
		return "none"
	}
	return strings.Join(fps, ",")
}
