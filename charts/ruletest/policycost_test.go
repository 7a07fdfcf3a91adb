package ruletest

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"

	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// Test_policyCostNearLimitFires: WebhookGuardPolicyCostNearLimit fires, on
// the series the guard exports, for a configuration whose owner's worst
// write is at the syncer's margin (0.8) or over the limit, naming the
// mapping and configuration, and not for one well under it.
func Test_policyCostNearLimitFires(t *testing.T) {
	for ratio, wantFiring := range map[float64]bool{0.3: false, 0.8: true, 1.34: true} {
		t.Run(fmt.Sprint(ratio), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			metrics.NewPolicySync(reg).WorstWriteCost.WithLabelValues("app", "ValidatingWebhookConfiguration/app").Set(ratio)
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var series string
			for _, f := range families {
				if f.GetName() == "webhook_guard_policy_worst_write_cost_ratio" {
					series = fmt.Sprintf(`%s{mapping="app",configuration="ValidatingWebhookConfiguration/app"} %v+0x%d`, f.GetName(), ratio, int(evalFor/time.Minute)+5)
				}
			}
			if series == "" {
				t.Fatal("the guard exports no webhook_guard_policy_worst_write_cost_ratio")
			}
			storage := promqltest.LoadedStorage(t, "load 1m\n  "+series+"\n")
			engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
			rule := alertingRule(t, renderedRules(t, "--set", "shape=policy"), "WebhookGuardPolicyCostNearLimit")
			fired := false
			for at := time.Duration(0); at <= 5*time.Minute; at += time.Minute {
				if _, err := rule.Eval(t.Context(), 0, start.Add(at), rules.EngineQueryFunc(engine, storage), nil, 0); err != nil {
					t.Fatalf("evaluating at %s: %v", at, err)
				}
				for _, a := range rule.ActiveAlerts() {
					if a.State == rules.StateFiring {
						fired = true
						if a.Labels.Get("mapping") != "app" || a.Labels.Get("configuration") != "ValidatingWebhookConfiguration/app" {
							t.Errorf("fired with labels %s, want mapping app and its configuration", a.Labels)
						}
					}
				}
			}
			if fired != wantFiring {
				t.Errorf("at a ratio of %v, fired = %t, want %t", ratio, fired, wantFiring)
			}
		})
	}
}
