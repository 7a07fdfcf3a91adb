package ruletest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"

	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// loadVerified is a promqltest load command for the trust path gauge the
// guard's own collector exports, constant over the evaluation: verified
// maps "kind/configuration/webhook" to 1 or 0.
func loadVerified(t *testing.T, verified map[string]float64) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := metrics.NewProbe(reg)
	for key, v := range verified {
		parts := strings.SplitN(key, "/", 3)
		m.Verified.WithLabelValues(parts...).Set(v)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		for _, s := range f.GetMetric() {
			var ls []string
			for _, l := range s.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			fmt.Fprintf(&b, "  %s{%s} %v+0x%d\n", f.GetName(), strings.Join(ls, ","), s.GetGauge().GetValue(), int(evalFor/time.Minute)+5)
		}
	}
	return b.String()
}

// Test_trustPathBrokenFires: WebhookGuardTrustPathBroken fires 2 minutes
// after a guarded entry stops verifying, unless the observer's info
// series says the entry fails open; an entry with no info series (the
// observer off) counts as fail-closed.
func Test_trustPathBrokenFires(t *testing.T) {
	ignore := func(e *metrics.WebhookEntry) { e.FailurePolicy = "Ignore" }
	conversion := entry("conversion", func(e *metrics.WebhookEntry) {
		e.Kind, e.Configuration, e.TimeoutSeconds = "CustomResourceDefinition", "widgets.example.com", ""
	})
	storage := promqltest.LoadedStorage(t, load(t, []metrics.WebhookEntry{
		entry("broken.example.io", nil),
		entry("broken-ignored.example.io", ignore),
		entry("verified.example.io", nil),
		conversion,
	})+loadVerified(t, map[string]float64{
		"ValidatingWebhookConfiguration/c/broken.example.io":         0,
		"ValidatingWebhookConfiguration/c/broken-ignored.example.io": 0,
		"ValidatingWebhookConfiguration/c/verified.example.io":       1,
		"ValidatingWebhookConfiguration/d/no-info.example.io":        0,
		"CustomResourceDefinition/widgets.example.com/conversion":    0,
	}))
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	query := rules.EngineQueryFunc(engine, storage)
	rule := alertingRule(t, renderedRules(t), "WebhookGuardTrustPathBroken")

	firstFired := map[string]time.Duration{}
	for at := time.Duration(0); at <= evalFor; at += time.Minute {
		if _, err := rule.Eval(t.Context(), 0, start.Add(at), query, nil, 0); err != nil {
			t.Fatalf("evaluating at %s: %v", at, err)
		}
		for _, a := range rule.ActiveAlerts() {
			key := a.Labels.Get("configuration") + "/" + a.Labels.Get("webhook")
			if _, seen := firstFired[key]; !seen && a.State == rules.StateFiring {
				firstFired[key] = at
			}
		}
	}
	var firing []string
	for key, at := range firstFired {
		firing = append(firing, key)
		if at != 2*time.Minute {
			t.Errorf("%s fired after %s, want 2m (the alert's for)", key, at)
		}
	}
	slices.Sort(firing)
	if want := []string{"c/broken.example.io", "d/no-info.example.io", "widgets.example.com/conversion"}; !slices.Equal(firing, want) {
		t.Errorf("firing for %v, want %v", firing, want)
	}
}

// Test_recordWriteErrorsFiresForTheTrustPathReport:
// WebhookGuardRecordWriteErrors fires when the leader cannot write the
// trust-path report, as it does for the decision reports, and not while
// its writes succeed.
func Test_recordWriteErrorsFiresForTheTrustPathReport(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.NewProbe(reg).ReportWrites.WithLabelValues("error").Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var name string // the counter the guard exports
	for _, f := range families {
		if strings.Contains(f.GetName(), "report_writes") {
			name = f.GetName()
		}
	}
	for result, wantFiring := range map[string]bool{"error": true, "updated": false} {
		t.Run(result, func(t *testing.T) {
			storage := promqltest.LoadedStorage(t, fmt.Sprintf("load 1m\n  %s{result=%q} 0+1x%d\n", name, result, int(evalFor/time.Minute)+5))
			engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
			rule := alertingRule(t, renderedRules(t), "WebhookGuardRecordWriteErrors")
			fired := false
			for at := time.Duration(0); at <= evalFor; at += time.Minute {
				if _, err := rule.Eval(t.Context(), 0, start.Add(at), rules.EngineQueryFunc(engine, storage), nil, 0); err != nil {
					t.Fatalf("evaluating at %s: %v", at, err)
				}
				for _, a := range rule.ActiveAlerts() {
					fired = fired || a.State == rules.StateFiring
				}
			}
			if fired != wantFiring {
				t.Errorf("with %s{result=%q} rising, fired = %t, want %t", name, result, fired, wantFiring)
			}
		})
	}
}
