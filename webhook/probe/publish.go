package probe

import (
	"context"
	"fmt"
	"slices"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

// DefaultReportRefresh is how often the trust-path report is rewritten
// when no verdict changed, so that a reader can tell a report nothing
// updates any more (its probed-at time) from a steady state.
const DefaultReportRefresh = records.TrustPathsRefresh

// maxReportResults bounds the results of the trust-path report (failures
// are kept first): the paths are bounded by the guarded entries, but a
// ClusterReport is one object of at most 1.5 MiB.
const maxReportResults = 1000

// maxDetailLen bounds a result's probe error.
const maxDetailLen = 256

// Publisher keeps the trust-path ClusterReport (records.TrustPathsReport)
// equal to the last round: one result per path, pass when it verified,
// fail when a fail-closed path did not (warn for failurePolicy Ignore:
// kube-apiserver then skips the webhook instead of failing the request).
// Each round reads the stored report (one GET) and writes it when it
// differs from the round (its results, its source, label and owner, or the
// time of the last write, so that anyone else's write is undone at the
// next round), or every Refresh; the leader alone publishes.
type Publisher struct {
	Client client.Client
	// Refresh is the longest time between two writes (DefaultReportRefresh
	// when 0).
	Refresh time.Duration
	// Writes counts the report's writes by result (created, updated,
	// unchanged, not-installed, error); nil counts nothing.
	Writes func(result string)
	Now    func() time.Time

	// since is when each path's current verdict began.
	since map[Key]verdictSince
	// writtenAt is the time of the last write, its probed-at annotation.
	writtenAt time.Time
}

// verdictSince is a path's verdict and when it began.
type verdictSince struct {
	reason Reason
	at     time.Time
}

// Publish writes results (a whole round) to the report when the stored
// report differs from them or from what this publisher last wrote, or the
// last write is older than Refresh. The OpenReports API not being
// installed is not an error: there is then nowhere to publish.
func (p *Publisher) Publish(ctx context.Context, results []Result) error {
	now := p.now()
	want := p.results(results, now)
	res, err := p.write(ctx, want, now)
	p.count(res)
	switch {
	case records.APINotInstalled(err):
		return nil // nowhere to publish; the series still say it all
	case err != nil:
		return fmt.Errorf("writing ClusterReport %s: %w", records.TrustPathsReport, err)
	case res != "unchanged":
		p.writtenAt = now
	}
	return nil
}

func (p *Publisher) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Publisher) refresh() time.Duration {
	if p.Refresh > 0 {
		return p.Refresh
	}
	return DefaultReportRefresh
}

func (p *Publisher) count(result string) {
	if p.Writes != nil {
		p.Writes(result)
	}
}

// write creates or replaces the report unless the stored one is what this
// publisher wrote last and holds results; the leader is its only writer,
// so a conflict (a leader change) is left to the next round.
func (p *Publisher) write(ctx context.Context, results []reportsv1alpha1.ReportResult, now time.Time) (string, error) {
	var rep reportsv1alpha1.ClusterReport
	err := p.Client.Get(ctx, types.NamespacedName{Name: records.TrustPathsReport}, &rep)
	if records.APINotInstalled(err) {
		return "not-installed", err
	}
	create := apierrors.IsNotFound(err)
	if err != nil && !create {
		return "error", err
	}
	if !create && p.current(&rep, results, now) {
		return "unchanged", nil
	}
	if create {
		rep = reportsv1alpha1.ClusterReport{ObjectMeta: metav1.ObjectMeta{Name: records.TrustPathsReport}}
	}
	fillReport(&rep, results, now)
	if create {
		err = p.Client.Create(ctx, &rep)
	} else {
		err = p.Client.Update(ctx, &rep)
	}
	switch {
	case records.APINotInstalled(err):
		return "not-installed", err
	case err != nil:
		return "error", err
	case create:
		return "created", nil
	}
	return "updated", nil
}

// current reports whether the stored report is the one this publisher
// wrote last, holds results, and is younger than Refresh.
func (p *Publisher) current(rep *reportsv1alpha1.ClusterReport, results []reportsv1alpha1.ReportResult, now time.Time) bool {
	return !p.writtenAt.IsZero() && now.Sub(p.writtenAt) < p.refresh() &&
		records.IsTrustPathsReport(rep) &&
		rep.Annotations[records.AnnotationProbedAt] == p.writtenAt.UTC().Format(time.RFC3339) &&
		equality.Semantic.DeepEqual(rep.Results, results) &&
		equality.Semantic.DeepEqual(rep.Summary, records.Summarize(results))
}

// fillReport sets the report's metadata, source, results and summary.
func fillReport(rep *reportsv1alpha1.ClusterReport, results []reportsv1alpha1.ReportResult, now time.Time) {
	if rep.Labels == nil {
		rep.Labels = map[string]string{}
	}
	rep.Labels[records.LabelManagedBy] = records.Source
	if rep.Annotations == nil {
		rep.Annotations = map[string]string{}
	}
	rep.Annotations[records.AnnotationProbedAt] = now.UTC().Format(time.RFC3339)
	rep.Source = records.Source
	rep.Scope = nil
	rep.OwnerReferences = nil
	rep.Results = results
	rep.Summary = records.Summarize(results)
}

// results are the round's results as report results, failing first, at
// most maxReportResults, each with the time its verdict began.
func (p *Publisher) results(round []Result, now time.Time) []reportsv1alpha1.ReportResult {
	next := make(map[Key]verdictSince, len(round))
	out := make([]reportsv1alpha1.ReportResult, 0, len(round))
	for _, r := range round {
		k := r.Path.Key()
		s, ok := p.since[k]
		if !ok || s.reason != r.Reason {
			s = verdictSince{reason: r.Reason, at: now.UTC().Truncate(time.Second)}
		}
		next[k] = s
		out = append(out, reportResult(r, s.at))
	}
	p.since = next
	rank := map[reportsv1alpha1.Result]int{"fail": 0, "warn": 1, "pass": 2}
	slices.SortStableFunc(out, func(a, b reportsv1alpha1.ReportResult) int { return rank[a.Result] - rank[b.Result] })
	return out[:min(len(out), maxReportResults)]
}

// reportResult is one path's verdict as a report result.
func reportResult(r Result, since time.Time) reportsv1alpha1.ReportResult {
	path := r.Path
	props := map[string]string{
		records.PropMapping:       path.Mapping,
		records.PropConfiguration: path.Kind + "/" + path.Configuration,
		records.PropWebhook:       path.Webhook,
		records.PropFailurePolicy: path.FailurePolicy,
		records.PropSince:         since.Format(time.RFC3339),
		records.PropResultID:      records.TrustPathResultID(path.Kind, path.Configuration, path.Webhook),
	}
	out := reportsv1alpha1.ReportResult{
		Source: records.Source, Policy: path.Mapping, Rule: records.RuleTrustPath, Category: records.CategoryTrustPath,
		Timestamp: metav1.Timestamp{Seconds: since.Unix()},
		Subjects:  []corev1.ObjectReference{*records.Scope(policy.GuardedKind(path.Kind), path.Configuration, "")},
		Result:    "pass", Scored: true, Severity: "info",
		Description: fmt.Sprintf("the caBundle verifies what %s serves", where(path)),
		Properties:  props,
	}
	if r.Verified() {
		return out
	}
	props[records.PropReason] = string(r.Reason)
	if r.Endpoint != "" {
		props[records.PropEndpoint] = boundText(r.Endpoint, maxWhereText)
	}
	if r.Err != nil {
		props[records.PropDetail] = records.Truncate(r.Err.Error(), maxDetailLen)
	}
	out.Result, out.Severity = "fail", "high"
	if path.FailurePolicy == "Ignore" {
		out.Result, out.Scored, out.Severity = "warn", false, "medium"
	}
	out.Description = failureMessage(r)
	props[records.PropHint] = fix(r)
	return out
}

// fix is what makes a failed path verify again.
func fix(r Result) string {
	p := r.Path
	entry := fmt.Sprintf("%s %s entry %s", p.Kind, p.Configuration, p.Webhook)
	switch r.Reason {
	case ReasonUnknownAuthority:
		return fmt.Sprintf("make the caBundle of %s hold the CA that signs what %s serves (the owner's CA), or serve a certificate that CA signs", entry, where(p))
	case ReasonExpired:
		return fmt.Sprintf("renew the certificate %s serves (and check the clock of the node it runs on)", where(p))
	case ReasonNameMismatch:
		return fmt.Sprintf("serve a certificate valid for %s (a DNS name, or an IP SAN for an address), the name kube-apiserver verifies", boundText(p.serverName(), maxWhereText))
	case ReasonUnreachable:
		return fmt.Sprintf("check that %s serves TLS and that the guard's pods may reach it (a network policy can let kube-apiserver in and keep the guard out)", where(p))
	case ReasonNoEndpoints:
		return fmt.Sprintf("run ready pods behind %s, or point %s at a Service that has them", where(p), entry)
	case ReasonNoCABundle:
		return fmt.Sprintf("set the caBundle of %s to the PEM of the CA that signs what it serves, or remove it to trust the system roots", entry)
	case ReasonNone:
	}
	return "see the guard's log (probe) for " + entry
}

// where names what kube-apiserver calls; a URL (its writer chose its
// length) is cut, so that a report of many entries stays within an
// object's size.
func where(p TrustPath) string {
	if p.Service != nil {
		return fmt.Sprintf("Service %s/%s port %d", p.Service.Namespace, p.Service.Name, p.Service.Port)
	}
	return boundText(p.URL, maxWhereText)
}

// failureMessage says what a failed probe means for kube-apiserver's calls.
func failureMessage(r Result) string {
	var what string
	switch r.Reason {
	case ReasonUnknownAuthority:
		what = "the caBundle does not verify the certificate it serves"
	case ReasonExpired:
		what = "the certificate it serves is expired or not yet valid"
	case ReasonNameMismatch:
		what = "the certificate it serves is not valid for " + boundText(r.Path.serverName(), maxWhereText)
	case ReasonUnreachable:
		what = "no TLS handshake completed"
	case ReasonNoEndpoints:
		what = "it has no ready endpoint"
	case ReasonNoCABundle:
		what = "the caBundle holds no certificate"
	case ReasonNone:
	}
	if what == "" {
		what = string(r.Reason) // any other reason, named as it is
	}
	consequence := "kube-apiserver's calls to it fail"
	if r.Path.FailurePolicy == "Ignore" {
		consequence += " and the webhook is skipped (failurePolicy Ignore)"
	}
	return fmt.Sprintf("%s: %s (%s); %s", where(r.Path), what, r.Reason, consequence)
}
