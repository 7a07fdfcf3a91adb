// Package records keeps what the guard decided as OpenReports ClusterReports
// (openreports.io/v1alpha1), one per guarded webhook configuration (owned by
// it, so deleted with it), and aggregated Kubernetes Events on the
// configuration. Decisions about configurations that do not exist (a denied
// CREATE, a DELETE) go to one report per mapping, so that names that were
// never created cannot multiply reports.
//
// Decisions are aggregated in memory and flushed every interval with at most
// one successful write per report per replica. A flush adds this replica's
// increments to what is stored (read-modify-write with resourceVersion
// conflict retries), so the counts of every replica add up and a restart
// loses nothing that was flushed.
package records

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
)

// Source is the ClusterReport and result source.
const Source = "webhook-guard"

// Labels and annotations on the ClusterReports.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelKind is the guarded object's kind, lower case, without
	// "WebhookConfiguration": validating, mutating, or (records of writes
	// to the policy shape's generated objects) validatingadmissionpolicy and
	// validatingadmissionpolicybinding.
	LabelKind = "webhook-guard.io/configuration-kind"
	// AnnotationDroppedResults counts results dropped (oldest first) to keep
	// the report under its bound.
	AnnotationDroppedResults = "webhook-guard.io/dropped-results"
	// AnnotationRecordedWrites lists the last writes counted in the report
	// (hashed, space-separated, oldest first), so that a write recorded by
	// admission on one replica and by the observer on another counts once.
	AnnotationRecordedWrites = "webhook-guard.io/recorded-writes"
)

// Result properties. Every result carries the key properties (mapping,
// rule, subject, webhook, decision, found), the counters and the times.
const (
	// PropResultID identifies a finding across flushes, whatever its counts
	// and message: Policy Reporter takes it as the result's ID instead of
	// hashing the (changing) message.
	PropResultID = "resultID"
	// PropConfiguration is Kind/name of the configuration, on results of the
	// reports of configurations that do not exist (their scope is empty).
	PropConfiguration = "configuration"
	PropMapping       = "mapping"
	PropMode          = "mode"
	PropDecision      = "decision"
	PropSubject       = "subject"
	PropWebhook       = "webhook"
	PropField         = "field"
	PropCount         = "count"
	// PropFirstSeen and PropLastSeen are RFC 3339 times.
	PropFirstSeen = "firstSeen"
	PropLastSeen  = "lastSeen"
	// PropExpected and PropFound are short CA fingerprints, comma-separated.
	PropExpected = "expectedCA"
	PropFound    = "foundCA"
	PropHint     = "hint"
	// Flapping results.
	PropWriters         = "writers"
	PropDistinctBundles = "distinctBundles"
	PropWindow          = "window"
	// PropOrigin is OriginObserved on results of changes the observer saw
	// in its watch; absent on results of requests the guard answered.
	PropOrigin = "origin"
	// PropFieldManagers lists the field managers that owned the changed
	// caBundles, with operation and time (observed results only).
	PropFieldManagers = "fieldManagers"
)

// OriginObserved marks results the observer recorded: changes seen after
// the fact, not requests decided. The same change can be recorded both
// ways in the static shape (once as decided, once as observed).
const OriginObserved = "observed"

// RuleFlapping names flapping results (policy.Rule has no such rule: it is
// a finding about many requests, not a verdict on one).
const RuleFlapping = "flapping"

// DecisionFlapping is the decision property of flapping results.
const DecisionFlapping = "flapping"

// The policy of results that no mapping produced.
const (
	// PolicyUnmanaged: results about configurations no mapping covers.
	PolicyUnmanaged = "(unmanaged)"
	// PolicyGeneratedObjects: results about writes to the admission
	// policies and bindings the policy shape generates.
	PolicyGeneratedObjects = "(policy-objects)"
)

// DefaultMaxResults bounds the results of one report.
const DefaultMaxResults = 100

// maxMessageLen bounds a result's message.
const maxMessageLen = 1024

// ReportName is the ClusterReport name for a guarded object:
// webhook-guard.<vwc|mwc|vap|vapb>.<name>, cut and hashed when that is too
// long for a name (fitName), so every valid configuration name gives a
// valid report name.
func ReportName(kind policy.GuardedKind, name string) string {
	return fitName(Source+"."+kind.ShortName()+"."+name, "", name)
}

// AbsentReportName is the ClusterReport of a mapping's configurations that
// do not exist: webhook-guard.absent.<mapping>, and webhook-guard.absent for
// those no mapping covers.
func AbsentReportName(mapping string) string {
	switch mapping {
	case "", PolicyUnmanaged:
		return Source + ".absent"
	case PolicyGeneratedObjects:
		return Source + ".absent.policy-objects"
	}
	return fitName(Source+".absent."+mapping, "", mapping)
}

// Scope is the reference to a guarded configuration.
func Scope(kind policy.GuardedKind, name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: kind.APIVersion(), Kind: string(kind), Name: name, UID: uid}
}

// Target is the ClusterReport one configuration's results go to.
type Target struct {
	Kind policy.GuardedKind
	Name string
	// UID is the configuration's; empty when it does not exist, and then the
	// results go to Mapping's report of absent configurations.
	UID     types.UID
	Mapping string
}

// Report is the name of the target's ClusterReport.
func (t Target) Report() string {
	if t.UID == "" {
		return AbsentReportName(t.Mapping)
	}
	return ReportName(t.Kind, t.Name)
}

// resultKey identifies one result: one per (mapping, rule, subject,
// webhook entry, decision, found CA), so that every distinct writer of a
// foreign CA is its own line. Config (Kind/name) is set in the reports of
// absent configurations only, which hold many configurations.
type resultKey struct {
	Policy, Rule, Subject, Webhook, Decision, Found, Config, Origin string
}

func keyOf(r *reportsv1alpha1.ReportResult) resultKey {
	p := r.Properties
	return resultKey{Policy: r.Policy, Rule: r.Rule, Subject: p[PropSubject], Webhook: p[PropWebhook], Decision: p[PropDecision], Found: p[PropFound], Config: p[PropConfiguration], Origin: p[PropOrigin]}
}

// resultID is a finding's stable identifier: a hash of what makes it a
// distinct finding (the configuration and the result key), never of counts,
// times or the message, so it is the same in every flush.
func resultID(kind policy.GuardedKind, name string, k resultKey) string {
	h := sha256.New()
	parts := []string{string(kind), name, k.Policy, k.Rule, k.Subject, k.Webhook, k.Decision, k.Found}
	if k.Origin != "" {
		// Observed findings are distinct from decided ones; decided IDs stay as they were.
		parts = append(parts, k.Origin)
	}
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0}) // no two field splits hash alike
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// delta is what one replica observed for one result since its last flush.
type delta struct {
	key         resultKey
	count       int64
	first, last time.Time
	mode        string
	field       string
	expected    string
	message     string
	hint        string
	writers     []string
	distinct    int
	window      string
	managers    string
	// attempts counts the flushes that failed to write it.
	attempts int
	// writes identify the writes counted in count (writeKey), when known:
	// a write admission decided and the observer saw counts once.
	writes []string
}

func (d *delta) add(o *delta) {
	d.count += o.count
	if o.first.Before(d.first) {
		d.first = o.first
	}
	if o.last.After(d.last) {
		d.last, d.mode, d.field, d.expected, d.message, d.hint, d.window, d.managers = o.last, o.mode, o.field, o.expected, o.message, o.hint, o.window, o.managers
	}
	d.writers = union(d.writers, o.writers)
	d.distinct = max(d.distinct, o.distinct)
	d.attempts = max(d.attempts, o.attempts)
	if room := maxDeltaWrites - len(d.writes); room > 0 {
		d.writes = append(d.writes, o.writes[:min(room, len(o.writes))]...)
	}
}

// maxDeltaWrites bounds the write identities one delta carries; writes past
// it are counted without one (and so never de-duplicated).
const maxDeltaWrites = 1024

// writeKey identifies what one write did to one webhook entry (the CAs it
// wrote there included): the unit a result counts. Hashed, so that it is
// short and the same in every replica.
func writeKey(write, webhook, found string) string {
	sum := sha256.Sum256([]byte(write + "\x00" + webhook + "\x00" + found))
	return hex.EncodeToString(sum[:8])
}

// resultOf is the OpenReports result value of a result: fail for enforce
// denials, warn for audit would-denies and flapping, pass for break-glass
// (allowed by design, listed for review), skip for writes to configurations
// no mapping covers (not evaluated).
func resultOf(k resultKey) reportsv1alpha1.Result {
	if k.Rule == string(policy.RuleUnmanaged) {
		return "skip"
	}
	switch k.Decision {
	case string(policy.OutcomeDeny):
		return "fail"
	case string(policy.OutcomeAudit), DecisionFlapping:
		return "warn"
	case string(policy.OutcomeBreakGlass):
		return "pass"
	}
	return "skip"
}

// scoredOf follows the OpenReports result meanings: pass and fail are
// scored, warn is "not met, and not scored" (audit mode's would-denies) and
// skip was not evaluated.
func scoredOf(r reportsv1alpha1.Result) bool {
	return r == "pass" || r == "fail"
}

// categoryOf groups rules the way a report UI filters them.
func categoryOf(rule string) string {
	if rule == RuleFlapping {
		return policy.RuleCAMismatch.Info().Category
	}
	if c := policy.Rule(rule).Info().Category; c != "" {
		return c
	}
	return "Other"
}

func severityOf(decision string) reportsv1alpha1.ResultSeverity {
	switch decision {
	case string(policy.OutcomeDeny), DecisionFlapping:
		return "high"
	case string(policy.OutcomeAudit):
		return "medium"
	}
	return "info"
}

// deltasOf turns one recorded decision into one delta per violation.
func deltasOf(d *policy.Decision, now time.Time) []*delta {
	pol := d.Mapping
	switch {
	case pol != "":
	case d.Kind.IsAdmissionPolicyObject():
		pol = PolicyGeneratedObjects
	default:
		pol = PolicyUnmanaged
	}
	origin, managers := "", ""
	if d.Observed {
		origin, managers = OriginObserved, fieldManagers(d.FieldManagers)
	}
	base := func(rule, webhook string, found []string) *delta {
		x := &delta{
			key:   resultKey{Policy: pol, Rule: rule, Subject: d.Subject, Webhook: webhook, Decision: string(d.Outcome), Found: strings.Join(found, ","), Origin: origin},
			count: 1, first: now, last: now, mode: string(d.Mode), message: truncate(d.Message()), managers: managers,
		}
		if d.Write != "" {
			x.writes = []string{writeKey(d.Write, webhook, x.key.Found)}
		}
		return x
	}
	if d.Outcome == policy.OutcomeBreakGlass || len(d.Violations) == 0 {
		return []*delta{base(string(d.Rule), "", nil)}
	}
	out := make([]*delta, 0, len(d.Violations))
	for _, v := range d.Violations {
		x := base(string(v.Rule), v.Webhook, v.Found)
		x.field, x.expected, x.hint = v.Field, strings.Join(v.Expected, ","), v.Hint
		x.message = truncate(v.String())
		out = append(out, x)
	}
	return out
}

// flappingDelta is a flapping report as a delta.
func flappingDelta(mapping string, r flapping.Report, now time.Time) *delta {
	origin := ""
	if r.Observed {
		origin = OriginObserved
	}
	return &delta{
		key:   resultKey{Policy: mapping, Rule: RuleFlapping, Decision: DecisionFlapping, Origin: origin},
		count: 1, first: now, last: now,
		writers: slices.Clone(r.Writers), distinct: r.DistinctBundles, window: r.Window.String(),
		message: truncate(strconv.Itoa(r.DistinctBundles) + " distinct caBundle values were written to " + string(r.Kind) + " " + r.Name +
			" within " + r.Window.String() + " by " + strings.Join(r.Writers, ", ") + "; several replicas each writing its own CA look like this"),
	}
}

func lessKey(a, b resultKey) bool {
	return slices.Compare([]string{a.Policy, a.Rule, a.Subject, a.Webhook, a.Decision, a.Found, a.Config, a.Origin},
		[]string{b.Policy, b.Rule, b.Subject, b.Webhook, b.Decision, b.Found, b.Config, b.Origin}) < 0
}

// fieldManagers is the field managers of an observed change, as a property
// ("name (Operation time), ...").
func fieldManagers(ms []policy.FieldManager) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.String()
	}
	return strings.Join(out, ", ")
}

// maxWriters bounds the writers listed on a flapping result.
const maxWriters = 32

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	if len(out) > maxWriters {
		out = out[:maxWriters]
	}
	return out
}

func truncate(s string) string { return Truncate(s, maxMessageLen) }

// Truncate cuts s to at most n bytes, ending in "..." when cut, without
// splitting a UTF-8 character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
