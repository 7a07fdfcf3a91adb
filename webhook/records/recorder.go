package records

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	reportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// DefaultFlushInterval is how often aggregated records are written.
const DefaultFlushInterval = 30 * time.Second

// EventRecorder is the part of client-go's events.EventRecorder the
// recorder uses (controller-runtime's manager.GetEventRecorder returns one).
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Options configure a Recorder.
type Options struct {
	// Client reads and writes ClusterReports.
	Client client.Client
	// Events emits the aggregated Events; nil disables them.
	Events EventRecorder
	// FlushInterval is how often the aggregate is written: at most one
	// successful write per report and one Event per (report, reason) per
	// interval per replica. Default DefaultFlushInterval.
	FlushInterval time.Duration
	// MaxResults bounds the results of one report. Default DefaultMaxResults.
	MaxResults int
	// Metrics counts the writes; required.
	Metrics *Metrics
	Log     logr.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Recorder aggregates decisions and flapping reports in memory and flushes
// them to ClusterReports and Events. It implements webhook.Recorder and
// controller-runtime's manager.Runnable (every replica runs it: each
// replica records the requests it answered).
type Recorder struct {
	opts Options

	mu      sync.Mutex
	pending map[reportKey]map[resultKey]*delta

	// missingAPI is set once the openreports.io API was found not served.
	missingAPI time.Time
}

type reportKey struct {
	kind policy.GuardedKind
	name string
}

// New returns a Recorder; run it with Start.
func New(opts Options) *Recorder {
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.MaxResults <= 0 {
		opts.MaxResults = DefaultMaxResults
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recorder{opts: opts, pending: map[reportKey]map[resultKey]*delta{}}
}

// RecordDecision aggregates a recorded decision; it never blocks on I/O.
func (r *Recorder) RecordDecision(_ context.Context, d *policy.Decision) {
	if d.DryRun || d.Name == "" {
		return
	}
	r.add(reportKey{d.Kind, d.Name}, deltasOf(d, r.opts.Now())...)
}

// RecordFlapping aggregates a flapping report.
func (r *Recorder) RecordFlapping(_ context.Context, mapping string, fr flapping.Report) {
	r.add(reportKey{fr.Kind, fr.Name}, flappingDelta(mapping, fr, r.opts.Now()))
}

func (r *Recorder) add(rk reportKey, ds ...*delta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	results := r.pending[rk]
	if results == nil {
		if len(r.pending) >= maxPendingReports {
			// Configurations are named by requests (a denied CREATE of a
			// fresh name): what waits for the next flush stays bounded.
			r.opts.Metrics.DroppedResults.Add(float64(len(ds)))
			return
		}
		results = map[resultKey]*delta{}
		r.pending[rk] = results
	}
	for _, d := range ds {
		if prev, ok := results[d.key]; ok {
			prev.add(d)
		} else if len(results) < maxPendingFactor*r.opts.MaxResults {
			results[d.key] = d
		} else {
			// A hostile storm of distinct keys (a new CA per request) cannot
			// grow memory without bound between flushes.
			r.opts.Metrics.DroppedResults.Inc()
		}
	}
}

// maxPendingFactor bounds the distinct results one report aggregates
// between flushes, as a multiple of MaxResults.
const maxPendingFactor = 4

// Bounds of one flush: the configurations with pending records, and the
// Events written (the first configurations in name order get theirs; every
// record still reaches its report).
const (
	maxPendingReports = 1024
	maxFlushEvents    = 128
)

// NeedLeaderElection is false: every replica flushes what it answered.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start flushes every interval until ctx ends, then flushes once more so
// that a rolling restart loses nothing.
func (r *Recorder) Start(ctx context.Context) error {
	t := time.NewTicker(r.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			r.Flush(final)
			cancel()
			return nil
		case <-t.C:
			r.Flush(ctx)
		}
	}
}

// Flush writes what was aggregated since the last flush: one
// read-modify-write per report (retried on conflicts), and one Event per
// (report, reason). Deltas that could not be written are kept for the next
// flush, so a failing API server delays records but does not lose them.
func (r *Recorder) Flush(ctx context.Context) {
	r.mu.Lock()
	pending := r.pending
	r.pending = map[reportKey]map[resultKey]*delta{}
	r.mu.Unlock()

	keys := make([]reportKey, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind < keys[j].kind
		}
		return keys[i].name < keys[j].name
	})
	events := 0
	for _, rk := range keys {
		deltas := sorted(pending[rk])
		if events < maxFlushEvents {
			events += r.emitEvents(rk, deltas)
		}
		if failed, err := r.writeReports(ctx, rk, deltas); err != nil {
			if APINotInstalled(err) {
				if r.opts.Now().Sub(r.missingAPI) > 10*time.Minute {
					r.missingAPI = r.opts.Now()
					r.opts.Log.Info("the openreports.io ClusterReport API is not installed; records go to the log and Events only (install the OpenReports CRDs to keep them)", "reason", err.Error())
				}
				continue
			}
			r.retryLater(rk, failed, err)
		}
	}
}

// maxWriteAttempts bounds the flushes that try to write one result: a
// write kube-apiserver keeps refusing must not be retried (and held in
// memory) for the rest of the process's life.
const maxWriteAttempts = 5

// retryLater keeps the results of a failed write for the next flush, unless
// the write can never succeed (the API server found the report invalid:
// retrying sends the same invalid object) or they failed maxWriteAttempts
// flushes already; those are dropped and counted.
func (r *Recorder) retryLater(rk reportKey, failed []*delta, err error) {
	report := ReportName(rk.kind, rk.name)
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		r.abandon(failed, "invalid")
		r.opts.Log.Error(err, "the API server refused the ClusterReport as invalid; its records are dropped", "report", report, "results", len(failed))
		return
	}
	var keep []*delta
	for _, d := range failed {
		if d.attempts++; d.attempts >= maxWriteAttempts {
			r.abandon([]*delta{d}, "attempts")
			continue
		}
		keep = append(keep, d)
	}
	if len(keep) < len(failed) {
		r.opts.Log.Error(err, "writing the ClusterReport failed too many times; records dropped", "report", report, "dropped", len(failed)-len(keep), "attempts", maxWriteAttempts)
	}
	if len(keep) > 0 {
		r.opts.Log.Error(err, "writing the ClusterReport failed; its records are kept for the next flush", "report", report)
		r.add(rk, keep...)
	}
}

// abandon counts results given up on, by reason: invalid | attempts.
func (r *Recorder) abandon(ds []*delta, reason string) {
	r.opts.Metrics.AbandonedResults.WithLabelValues(reason).Add(float64(len(ds)))
}

// APINotInstalled reports whether err says the cluster does not serve the
// ClusterReport API (the OpenReports CRDs are not installed): the client's
// mapping finds no kind, or kube-apiserver answers 404 for the resource
// itself (not for one report).
func APINotInstalled(err error) bool {
	return meta.IsNoMatchError(err) || isNotServed(err)
}

func isNotServed(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	return apierrors.IsNotFound(err) && se.Status().Details != nil && se.Status().Details.Kind == "clusterreports" && se.Status().Details.Name == ""
}

func sorted(m map[resultKey]*delta) []*delta {
	out := make([]*delta, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return lessKey(out[i].key, out[j].key) })
	return out
}

// writeReports writes one configuration's deltas to the report(s) they go
// to (targetsOf) and returns those that were not written.
func (r *Recorder) writeReports(ctx context.Context, rk reportKey, deltas []*delta) (failed []*delta, err error) {
	targets, err := r.targetsOf(ctx, rk, deltas)
	if err != nil {
		return deltas, err
	}
	for t, ds := range targets {
		if werr := r.writeReport(ctx, t, ds); werr != nil {
			failed, err = append(failed, ds...), werr
		}
	}
	return failed, err
}

// writeReport merges deltas into the stored report: Get, add, Update (or
// Create), retried on a resourceVersion conflict with a fresh read, so that
// concurrent replicas' increments are all kept.
func (r *Recorder) writeReport(ctx context.Context, t Target, deltas []*delta) error {
	name := t.Report()
	attempt := 0
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		attempt++
		var rep reportsv1alpha1.ClusterReport
		err := r.opts.Client.Get(ctx, types.NamespacedName{Name: name}, &rep)
		create := apierrors.IsNotFound(err) && !isNotServed(err)
		if err != nil && !create {
			return err
		}
		if create {
			rep = reportsv1alpha1.ClusterReport{ObjectMeta: metav1.ObjectMeta{Name: name}}
		}
		dropped := mergeDeltas(&rep, t, deltas, r.opts.MaxResults)
		if create {
			err = r.opts.Client.Create(ctx, &rep)
		} else {
			err = r.opts.Client.Update(ctx, &rep)
		}
		r.opts.Metrics.ReportWrites.WithLabelValues(writeResult(create, err)).Inc()
		if err == nil && dropped > 0 {
			r.opts.Metrics.DroppedResults.Add(float64(dropped))
		}
		if err != nil && attempt > 1 {
			r.opts.Log.V(1).Info("ClusterReport write retry", "report", name, "attempt", attempt, "reason", err.Error())
		}
		return err
	})
}

func writeResult(create bool, err error) string {
	switch {
	case err == nil && create:
		return "created"
	case err == nil:
		return "updated"
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return "conflict"
	}
	return "error"
}

// Event reasons, one Event per (report, reason) per flush; a rule that names
// its own reason has it in policy's rule table (unmanaged: UnmanagedWrite).
const (
	ReasonWouldDeny  = "WouldDeny"
	ReasonDenied     = "Denied"
	ReasonBreakGlass = "BreakGlass"
	ReasonFlapping   = "CABundleFlapping"
)

func reasonOf(d *delta) (reason, eventType string) {
	switch {
	case d.key.Decision == DecisionFlapping:
		return ReasonFlapping, corev1.EventTypeWarning
	case d.key.Rule == string(policy.RuleUnmanaged):
		return policy.RuleUnmanaged.Info().EventReason, corev1.EventTypeNormal
	case d.key.Decision == string(policy.OutcomeDeny):
		return ReasonDenied, corev1.EventTypeWarning
	case d.key.Decision == string(policy.OutcomeBreakGlass):
		return ReasonBreakGlass, corev1.EventTypeWarning
	}
	return ReasonWouldDeny, corev1.EventTypeWarning
}

// maxEventLines bounds the lines of one Event's note.
const maxEventLines = 5

// emitEvents emits one Event per reason for a configuration, summarizing
// every result of that reason in this interval, and returns how many.
func (r *Recorder) emitEvents(rk reportKey, deltas []*delta) int {
	if r.opts.Events == nil {
		return 0
	}
	type agg struct {
		eventType string
		total     int64
		lines     []string
	}
	// One Event per reason and origin: what the observer saw after the
	// fact is never folded into what admission decided.
	type reasonOrigin struct{ reason, origin string }
	byReason := map[reasonOrigin]*agg{}
	for _, d := range deltas {
		reason, et := reasonOf(d)
		ro := reasonOrigin{reason, d.key.Origin}
		a := byReason[ro]
		if a == nil {
			a = &agg{eventType: et}
			byReason[ro] = a
		}
		a.total += d.count
		line := fmt.Sprintf("%s by %s x%d", d.key.Rule, orNone(d.key.Subject, strings.Join(d.writers, ",")), d.count)
		if d.key.Found != "" {
			line += " (found CA " + d.key.Found + ")"
		}
		a.lines = append(a.lines, line)
	}
	reasons := make([]reasonOrigin, 0, len(byReason))
	for k := range byReason {
		reasons = append(reasons, k)
	}
	sort.Slice(reasons, func(i, j int) bool {
		return reasons[i].reason < reasons[j].reason || reasons[i].reason == reasons[j].reason && reasons[i].origin < reasons[j].origin
	})
	obj := regarding(rk)
	for _, ro := range reasons {
		reason, a := ro.reason, byReason[ro]
		action, seen := "Admission", ""
		if ro.origin == OriginObserved {
			action, seen = "Observed", " observed"
		}
		lines := a.lines
		if len(lines) > maxEventLines {
			lines = append(lines[:maxEventLines:maxEventLines], fmt.Sprintf("and %d more", len(a.lines)-maxEventLines))
		}
		note := fmt.Sprintf("webhook-guard: %d%s in the last %s: %s; see ClusterReport %s", a.total, seen, r.opts.FlushInterval,
			strings.Join(lines, "; "), ReportName(rk.kind, rk.name))
		if len(note) > maxMessageLen {
			note = truncate(note)
		}
		r.opts.Events.Eventf(obj, nil, a.eventType, reason, action, "%s", note)
		r.opts.Metrics.EventsEmitted.WithLabelValues(reason).Inc()
	}
	return len(reasons)
}

func orNone(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}

// regarding is the object an Event is about: only its kind and name are
// known (and needed) here.
func regarding(rk reportKey) runtime.Object {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: rk.name}}
	obj.APIVersion, obj.Kind = rk.kind.APIVersion(), string(rk.kind)
	return obj
}

// Metrics count what the recorder writes; they are defined with every other
// series the guard exports in webhook/metrics.
type Metrics = metrics.Records

// NewMetrics creates the recorder's collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics { return metrics.NewRecords(reg) }
