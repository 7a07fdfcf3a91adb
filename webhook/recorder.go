package webhook

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
)

// Recorder keeps what the guard decided so that audit mode can be reviewed.
// Implementations must not block the admission path.
type Recorder interface {
	// RecordDecision is called for every decision with Record set.
	RecordDecision(ctx context.Context, d *policy.Decision)
	// RecordFlapping is called when a configuration is found flapping.
	RecordFlapping(ctx context.Context, mapping string, r flapping.Report)
}

// LogRecorder writes each record as one structured log line, which a log
// pipeline keeps durably.
type LogRecorder struct {
	Log logr.Logger
}

// RecordDecision implements Recorder.
func (l LogRecorder) RecordDecision(_ context.Context, d *policy.Decision) {
	kv := []any{"mapping", d.Mapping, "mode", d.Mode, "rule", d.Rule, "outcome", d.Outcome,
		"operation", d.Operation, "kind", d.Kind, "name", d.Name, "subject", d.Subject, "dryRun", d.DryRun,
		"violations", d.Violations}
	if d.Observed {
		kv = append(kv, "observed", true, "fieldManagers", d.FieldManagers)
	}
	l.Log.Info("decision recorded", kv...)
}

// RecordFlapping implements Recorder.
func (l LogRecorder) RecordFlapping(_ context.Context, mapping string, r flapping.Report) {
	kv := []any{"mapping", mapping, "kind", r.Kind, "name", r.Name,
		"distinctBundles", r.DistinctBundles, "window", r.Window.String(), "writers", r.Writers}
	if r.Observed {
		kv = append(kv, "observed", true)
	}
	l.Log.Info("caBundle flapping detected", kv...)
}

// Recorders fans every record out to each recorder in order (the log line
// and the durable ClusterReports).
type Recorders []Recorder

// RecordDecision implements Recorder.
func (rs Recorders) RecordDecision(ctx context.Context, d *policy.Decision) {
	for _, r := range rs {
		r.RecordDecision(ctx, d)
	}
}

// RecordFlapping implements Recorder.
func (rs Recorders) RecordFlapping(ctx context.Context, mapping string, r flapping.Report) {
	for _, rec := range rs {
		rec.RecordFlapping(ctx, mapping, r)
	}
}
