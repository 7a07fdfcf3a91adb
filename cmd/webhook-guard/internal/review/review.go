// Package review turns the guard's records (its ClusterReports) and
// kube-apiserver's audit log into findings: per mapping and subject, the
// rule, the decision, the counts and the config change that fixes it.
package review

import (
	"slices"
	"strconv"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/auditlog"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// Finding is one line of the review: one result of one report.
type Finding struct {
	Mapping       string `json:"mapping"`
	Subject       string `json:"subject,omitempty"`
	Rule          string `json:"rule"`
	Decision      string `json:"decision"`
	Mode          string `json:"mode,omitempty"`
	Configuration string `json:"configuration"`
	Webhook       string `json:"webhook,omitempty"`
	ExpectedCA    string `json:"expectedCA,omitempty"`
	FoundCA       string `json:"foundCA,omitempty"`
	Writers       string `json:"writers,omitempty"`
	Count         int64  `json:"count"`
	FirstSeen     string `json:"firstSeen"`
	LastSeen      string `json:"lastSeen"`
	// WouldDeny is true for what enforce mode denies (or denied).
	WouldDeny  bool   `json:"wouldDeny"`
	Suggestion string `json:"suggestion"`
	// Report is the ClusterReport holding the finding (-o name).
	Report string `json:"-"`
	// Origin is empty for requests the guard decided, "observed" for
	// changes its observer saw in a watch, "audit-log" for decisions read
	// from kube-apiserver's audit log.
	Origin string `json:"origin,omitempty"`
	// FieldManagers own the changed caBundles (observed findings).
	FieldManagers string `json:"fieldManagers,omitempty"`
}

// Result is the whole review, as -o json|yaml prints it.
type Result struct {
	Findings []Finding `json:"findings"`
	// WouldDeny counts the findings enforce mode denies.
	WouldDeny int `json:"wouldDeny"`
	// DroppedResults counts results the reports dropped to stay bounded.
	DroppedResults int `json:"droppedResults,omitempty"`
	// AuditLog says what the audit log held, when one was read.
	AuditLog *auditlog.Summary `json:"auditLog,omitempty"`
	// TrustPaths is the guard's last probe round, when it published one
	// (and no decision filter is set).
	TrustPaths *TrustPaths `json:"trustPaths,omitempty"`
}

// Filter keeps the findings of one mapping, one decision, and last seen at
// or after Since; zero values keep everything.
type Filter struct {
	Mapping  string
	Decision string
	Since    time.Time
}

// Decisions are the values Filter.Decision takes besides empty.
var Decisions = []string{string(policy.OutcomeDeny), string(policy.OutcomeAudit), string(policy.OutcomeBreakGlass), records.DecisionFlapping}

// FromReports is the review of the guard's ClusterReports: one finding per
// result of a report of source webhook-guard, filtered and sorted, and the
// trust paths of the prober's report.
func FromReports(reports []reportsv1alpha1.ClusterReport, filter Filter) Result {
	res := Result{Findings: []Finding{}}
	for _, rep := range reports {
		if rep.Source != records.Source {
			continue
		}
		if rep.Name == records.TrustPathsReport {
			// Only the report as the guard writes it: anyone who may
			// write ClusterReports can create one by that name.
			if records.IsTrustPathsReport(&rep) {
				res.TrustPaths = trustPathsOf(rep, filter)
			}
			continue
		}
		dropped, _ := strconv.Atoi(rep.Annotations[records.AnnotationDroppedResults])
		res.DroppedResults += dropped
		conf := rep.Name
		if rep.Scope != nil {
			conf = rep.Scope.Kind + "/" + rep.Scope.Name
		}
		for _, r := range rep.Results {
			p := r.Properties
			f := Finding{
				Mapping: r.Policy, Subject: p[records.PropSubject], Rule: r.Rule, Decision: p[records.PropDecision], Mode: p[records.PropMode],
				Configuration: conf, Webhook: p[records.PropWebhook], ExpectedCA: p[records.PropExpected], FoundCA: p[records.PropFound],
				Writers: p[records.PropWriters], FirstSeen: p[records.PropFirstSeen], LastSeen: p[records.PropLastSeen], Report: rep.Name,
				Origin: p[records.PropOrigin], FieldManagers: p[records.PropFieldManagers],
			}
			if c := p[records.PropConfiguration]; c != "" { // a report of absent configurations
				f.Configuration = c
			}
			f.Count, _ = strconv.ParseInt(p[records.PropCount], 10, 64)
			// The recorder's result says it: fail is an enforce denial,
			// warn an audit would-deny or flapping (records.resultOf).
			res.add(f, r.Result == "fail" || r.Result == "warn", filter)
		}
	}
	sortFindings(res.Findings)
	return res
}

// AddAuditLog adds the decisions of an audit log to the review, filtered
// like the reports' findings.
func (res *Result) AddAuditLog(decisions []auditlog.Decision, sum auditlog.Summary, filter Filter) {
	res.AuditLog = &sum
	for _, d := range decisions {
		f := Finding{
			Mapping: d.Mapping, Subject: d.Subject, Rule: d.Rule, Decision: d.Decision, Configuration: d.Configuration,
			Webhook: d.Webhook, FoundCA: d.FoundCA, Count: d.Count, FirstSeen: d.FirstSeen, LastSeen: d.LastSeen,
			Origin: auditlog.Origin,
		}
		res.add(f, f.Decision == string(policy.OutcomeDeny) || f.Decision == string(policy.OutcomeAudit), filter)
	}
	sortFindings(res.Findings)
}

// add keeps a finding that passes the filter, with its suggestion.
func (res *Result) add(f Finding, wouldDeny bool, filter Filter) {
	if filter.Mapping != "" && f.Mapping != filter.Mapping || filter.Decision != "" && f.Decision != filter.Decision {
		return
	}
	if !filter.Since.IsZero() {
		if last, err := time.Parse(time.RFC3339, f.LastSeen); err == nil && last.Before(filter.Since) {
			return
		}
	}
	f.WouldDeny = wouldDeny
	f.Suggestion = Suggest(f)
	if f.WouldDeny {
		res.WouldDeny++
	}
	res.Findings = append(res.Findings, f)
}

func sortFindings(fs []Finding) {
	slices.SortFunc(fs, func(a, b Finding) int {
		return slices.Compare(
			[]string{a.Mapping, a.Subject, a.Rule, a.Configuration, a.Webhook, a.Decision, a.FoundCA, a.Origin},
			[]string{b.Mapping, b.Subject, b.Rule, b.Configuration, b.Webhook, b.Decision, b.FoundCA, b.Origin})
	})
}

// Suggest fills the finding's facts into its rule's suggestion from the
// rule table; flapping, found across many requests rather than decided on
// one, is no rule and has its own.
func Suggest(f Finding) string {
	facts := policy.FindingFacts{
		Mapping: f.Mapping, Subject: f.Subject, Configuration: f.Configuration,
		ExpectedCA: f.ExpectedCA, FoundCA: f.FoundCA,
		Observed: f.Origin == records.OriginObserved, FieldManagers: f.FieldManagers, Writers: f.Writers,
	}
	if f.Rule == records.RuleFlapping {
		return flapping.Suggestion(facts)
	}
	if s := policy.Rule(f.Rule).Info().Suggest; s != nil {
		return s(facts)
	}
	return "see the guard's log for this rule"
}
