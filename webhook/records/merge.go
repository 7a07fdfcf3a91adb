package records

import (
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mergeDeltas adds this replica's deltas to a stored report (or a new one) and
// keeps it within maxResults, dropping the results seen longest ago. A
// configuration's report is owned by it (the garbage collector deletes it
// with the configuration); a report of absent configurations has no scope
// and no owner. It is pure so that the merge is unit tested without an API
// server.
func mergeDeltas(rep *reportsv1alpha1.ClusterReport, t Target, deltas []*delta, maxResults int) (dropped int) {
	stamp(rep, t, maxResults)
	recorded := parseRecordedWrites(rep.Annotations[AnnotationRecordedWrites])
	takeBack := addDeltas(rep, t, deltas, recorded)
	rep.Results = takeBackObserved(rep.Results, takeBack)
	if len(recorded.order) > 0 {
		if rep.Annotations == nil {
			rep.Annotations = map[string]string{}
		}
		rep.Annotations[AnnotationRecordedWrites] = recorded.String()
	}
	dropped = dropOldest(rep, maxResults)
	sort.SliceStable(rep.Results, func(i, j int) bool { return lessKey(keyOf(&rep.Results[i]), keyOf(&rep.Results[j])) })
	rep.Summary = Summarize(rep.Results)
	return dropped
}

// stamp sets what every flush writes on a report whatever it held: the
// source, the labels, the scope and owner of a configuration's report, and
// the limit.
func stamp(rep *reportsv1alpha1.ClusterReport, t Target, maxResults int) {
	rep.Source = Source
	if rep.Labels == nil {
		rep.Labels = map[string]string{}
	}
	rep.Labels[LabelManagedBy] = Source
	if t.UID != "" {
		rep.Scope = Scope(t.Kind, t.Name, t.UID)
		rep.Labels[LabelKind] = strings.ToLower(strings.TrimSuffix(string(t.Kind), "WebhookConfiguration"))
		// Replaced, not added to: a configuration deleted and created again
		// has a new uid, and the old one would let the collector delete the
		// report of the new configuration.
		rep.OwnerReferences = []metav1.OwnerReference{{APIVersion: t.Kind.APIVersion(), Kind: string(t.Kind), Name: t.Name, UID: t.UID}}
	}
	rep.Configuration = &reportsv1alpha1.ReportConfiguration{Limits: reportsv1alpha1.Limits{MaxResults: maxResults}}
}

// addDeltas adds each delta to its result (a new one if the report has
// none), skipping writes recorded already, and returns the observed results
// that admission's records of the same writes take back.
func addDeltas(rep *reportsv1alpha1.ClusterReport, t Target, deltas []*delta, recorded *recordedWrites) []string {
	index := map[resultKey]int{}
	for i := range rep.Results {
		index[keyOf(&rep.Results[i])] = i
	}
	// A write both admission and the observer recorded counts where
	// admission put it: its record names the user, the observer's only the
	// field manager.
	deltas = slices.Clone(deltas)
	slices.SortStableFunc(deltas, func(a, b *delta) int {
		return strings.Compare(a.key.Origin, b.key.Origin)
	})
	var takeBack []string
	for _, d := range deltas {
		var back []string
		if d, back = recorded.admit(d, resultID(t.Kind, t.Name, d.key)); d == nil {
			continue // every write it counts is counted already
		}
		takeBack = append(takeBack, back...)
		k := d.key
		if t.UID == "" {
			k.Config = string(t.Kind) + "/" + t.Name
		}
		i, ok := index[k]
		if !ok {
			rep.Results = append(rep.Results, reportsv1alpha1.ReportResult{Source: Source, Policy: k.Policy, Rule: k.Rule, Properties: map[string]string{}})
			i = len(rep.Results) - 1
			index[k] = i
		}
		apply(&rep.Results[i], d, k, t)
	}
	return takeBack
}

// dropOldest keeps the report within maxResults (0: unbounded), dropping
// the results seen longest ago and counting them in an annotation; it
// returns how many it dropped.
func dropOldest(rep *reportsv1alpha1.ClusterReport, maxResults int) int {
	over := len(rep.Results) - maxResults
	if over <= 0 || maxResults <= 0 {
		return 0
	}
	sort.SliceStable(rep.Results, func(i, j int) bool {
		return rep.Results[i].Properties[PropLastSeen] < rep.Results[j].Properties[PropLastSeen]
	})
	rep.Results = rep.Results[over:]
	if rep.Annotations == nil {
		rep.Annotations = map[string]string{}
	}
	prev, _ := strconv.Atoi(rep.Annotations[AnnotationDroppedResults])
	rep.Annotations[AnnotationDroppedResults] = strconv.Itoa(prev + over)
	return over
}

// Summarize counts the results by OpenReports result value.
func Summarize(results []reportsv1alpha1.ReportResult) reportsv1alpha1.ReportSummary {
	var s reportsv1alpha1.ReportSummary
	for _, r := range results {
		switch r.Result {
		case "pass":
			s.Pass++
		case "fail":
			s.Fail++
		case "warn":
			s.Warn++
		case "error":
			s.Error++
		default:
			s.Skip++
		}
	}
	return s
}

// takeBackObserved decrements, once per reference, the observed result
// whose result ID (resultID) starts with it (a write the observer counted before
// admission's record of it arrived), and drops a result left at zero.
func takeBackObserved(results []reportsv1alpha1.ReportResult, refs []string) []reportsv1alpha1.ReportResult {
	if len(refs) == 0 {
		return results
	}
	for _, ref := range refs {
		for i := range results {
			p := results[i].Properties
			if p[PropOrigin] != OriginObserved || !strings.HasPrefix(p[PropResultID], ref) {
				continue
			}
			n, _ := strconv.ParseInt(p[PropCount], 10, 64)
			p[PropCount] = strconv.FormatInt(n-1, 10)
			break
		}
	}
	return slices.DeleteFunc(results, func(r reportsv1alpha1.ReportResult) bool {
		return r.Properties[PropOrigin] == OriginObserved && r.Properties[PropCount] == "0"
	})
}

func apply(r *reportsv1alpha1.ReportResult, d *delta, k resultKey, t Target) {
	p := r.Properties
	p[PropResultID] = resultID(t.Kind, t.Name, d.key)
	setOrDelete(p, PropConfiguration, k.Config)
	p[PropMapping] = k.Policy
	p[PropDecision] = k.Decision
	setOrDelete(p, PropSubject, k.Subject)
	setOrDelete(p, PropWebhook, k.Webhook)
	setOrDelete(p, PropFound, k.Found)
	setOrDelete(p, PropOrigin, k.Origin)

	prev, _ := strconv.ParseInt(p[PropCount], 10, 64)
	p[PropCount] = strconv.FormatInt(prev+d.count, 10)
	first, last := d.first.UTC(), d.last.UTC()
	if t, err := time.Parse(time.RFC3339, p[PropFirstSeen]); err == nil && t.Before(first) {
		first = t
	}
	newer := true
	if t, err := time.Parse(time.RFC3339, p[PropLastSeen]); err == nil && t.After(last) {
		last, newer = t, false
	}
	p[PropFirstSeen] = first.Format(time.RFC3339)
	p[PropLastSeen] = last.Format(time.RFC3339)
	if newer || r.Description == "" {
		setOrDelete(p, PropMode, d.mode)
		setOrDelete(p, PropField, d.field)
		setOrDelete(p, PropExpected, d.expected)
		setOrDelete(p, PropHint, d.hint)
		setOrDelete(p, PropWindow, d.window)
		setOrDelete(p, PropFieldManagers, d.managers)
		r.Description = d.message
	}
	if len(d.writers) > 0 {
		var stored []string
		if s := p[PropWriters]; s != "" {
			stored = strings.Split(s, ",")
		}
		p[PropWriters] = strings.Join(union(stored, d.writers), ",")
	}
	if d.distinct > 0 {
		prevDistinct, _ := strconv.Atoi(p[PropDistinctBundles])
		p[PropDistinctBundles] = strconv.Itoa(max(prevDistinct, d.distinct))
	}
	r.Result = resultOf(k)
	r.Scored = scoredOf(r.Result)
	r.Category = categoryOf(k.Rule)
	r.Severity = severityOf(k.Decision)
	r.Timestamp = metav1.Timestamp{Seconds: last.Unix()}
	r.Subjects = []corev1.ObjectReference{*Scope(t.Kind, t.Name, t.UID)}
}

func setOrDelete(m map[string]string, k, v string) {
	if v == "" {
		delete(m, k)
		return
	}
	m[k] = v
}
