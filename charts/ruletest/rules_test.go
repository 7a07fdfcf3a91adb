package ruletest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// start is where promqltest's load puts the first sample (time() is 0).
var start = time.Unix(0, 0).UTC()

// evalFor is how long the rules are evaluated, once a minute: longer than
// any alert's for.
const evalFor = 30 * time.Minute

// renderedRules renders the chart's PrometheusRule with bin/helm (default
// values, the rule enabled, then the --set arguments set) and parses its groups the way Prometheus loads
// a rule file: every expression and annotation template of every alert
// must be valid.
func renderedRules(t *testing.T, set ...string) *rulefmt.RuleGroups {
	t.Helper()
	helm, err := filepath.Abs(filepath.Join("..", "..", "bin", "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("%s is missing: run make tools (hack/build-helm.sh builds helm from the Go module proxy)", helm)
	}
	home := t.TempDir()
	args := append([]string{"template", "webhook-guard", filepath.Join("..", "webhook-guard"),
		"--namespace", "webhook-guard", "--kube-version", "1.37.0",
		"--show-only", "templates/prometheusrule.yaml", "--set", "monitoring.prometheusRule.enabled=true"}, set...)
	cmd := exec.CommandContext(t.Context(), helm, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	var rule struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &rule); err != nil {
		t.Fatal(err)
	}
	// JSON is YAML: the spec is a rule file's content.
	groups, errs := rulefmt.Parse(rule.Spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("Prometheus refuses the chart's rules: %v", errs)
	}
	return groups
}

// alertingRule builds the engine's rule for the alert named name.
func alertingRule(t *testing.T, groups *rulefmt.RuleGroups, name string) *rules.AlertingRule {
	t.Helper()
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != name {
				continue
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			return rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, slog.New(slog.DiscardHandler))
		}
	}
	t.Fatalf("the chart has no alert %s", name)
	return nil
}

// load is a promqltest load command for the health series the guard's own
// collector exports for entries, constant over the evaluation.
func load(t *testing.T, entries []metrics.WebhookEntry) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	metrics.NewObserver(reg).Health.SetSource(func() []metrics.WebhookEntry { return entries })
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("load 1m\n")
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "webhook_guard_webhook_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			fmt.Fprintf(&b, "  %s{%s} %v+0x%d\n", f.GetName(), strings.Join(ls, ","), m.GetGauge().GetValue(), int(evalFor/time.Minute)+5)
		}
	}
	return b.String()
}

// entry is a validating webhook entry of configuration "c", owned by
// mapping "app", with failure policy Fail, a usable caBundle expiring in
// 60 days and no Service; edit changes it.
func entry(webhook string, edit func(e *metrics.WebhookEntry)) metrics.WebhookEntry {
	e := metrics.WebhookEntry{Kind: "ValidatingWebhookConfiguration", Configuration: "c", Webhook: webhook, FailurePolicy: "Fail",
		TimeoutSeconds: "10", Mapping: "app", CAFingerprint: "0123456789abcdef", CAExpiry: start.Add(60 * 24 * time.Hour)}
	if edit != nil {
		edit(&e)
	}
	return e
}

func calls(namespace, name string, ready int) func(e *metrics.WebhookEntry) {
	return func(e *metrics.WebhookEntry) {
		e.ServiceNamespace, e.ServiceName, e.ReadyEndpoints, e.EndpointsKnown = namespace, name, ready, true
	}
}

func Test_alertsFire(t *testing.T) {
	ignore := func(e *metrics.WebhookEntry) { e.FailurePolicy = "Ignore" }
	both := func(edits ...func(e *metrics.WebhookEntry)) func(e *metrics.WebhookEntry) {
		return func(e *metrics.WebhookEntry) {
			for _, edit := range edits {
				edit(e)
			}
		}
	}
	invalid := func(e *metrics.WebhookEntry) { e.CAFingerprint, e.CAExpiry = "invalid", time.Time{} }
	// A CRD's conversion webhook and an APIService's service: one entry
	// each, every one named alike, failure_policy Fail, no timeout.
	trust := func(kind, name, mapping string) func(e *metrics.WebhookEntry) {
		return func(e *metrics.WebhookEntry) {
			e.Kind, e.Configuration, e.Mapping, e.TimeoutSeconds = kind, name, mapping, ""
		}
	}
	crd := func(name string, edits ...func(e *metrics.WebhookEntry)) metrics.WebhookEntry {
		return entry("conversion", both(append([]func(e *metrics.WebhookEntry){trust("CustomResourceDefinition", name, "app")}, edits...)...))
	}
	apiService := func(name string, edits ...func(e *metrics.WebhookEntry)) metrics.WebhookEntry {
		return entry("service", both(append([]func(e *metrics.WebhookEntry){trust("APIService", name, "app")}, edits...)...))
	}
	storage := promqltest.LoadedStorage(t, load(t, []metrics.WebhookEntry{
		entry("healthy.example.io", calls("app", "up", 2)),
		entry("expiring.example.io", func(e *metrics.WebhookEntry) { e.CAExpiry = start.Add(10 * 24 * time.Hour) }),
		entry("unusable.example.io", invalid),
		entry("unusable-ignored.example.io", both(invalid, ignore)),
		entry("no-endpoints.example.io", calls("app", "down", 0)),
		entry("no-endpoints-ignored.example.io", both(calls("app", "down", 0), ignore)),
		entry("url.example.io", nil),
		crd("healthy.example.com", calls("app", "up", 2)),
		crd("other.example.com", trust("CustomResourceDefinition", "other.example.com", "")),
		crd("expiring.example.com", func(e *metrics.WebhookEntry) { e.CAExpiry = start.Add(10 * 24 * time.Hour) }),
		crd("unusable.example.com", invalid),
		apiService("v1.healthy.example.com", calls("app", "up", 2)),
		apiService("v1.down.example.com", calls("app", "down", 0)),
	}))
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	query := rules.EngineQueryFunc(engine, storage)
	groups := renderedRules(t)

	for alert, want := range map[string]struct {
		firing []string
		// after is the alert's for: how long the bad case lasts before it fires.
		after time.Duration
		// mapping is the owner mapping the alert must name ("": none).
		mapping string
	}{
		"WebhookGuardWebhookCABundleExpiring": {firing: []string{"c/expiring.example.io", "expiring.example.com/conversion"}},
		"WebhookGuardFailClosedWebhookUnusableCABundle": {firing: []string{"c/unusable.example.io", "unusable.example.com/conversion"},
			after: 15 * time.Minute, mapping: "app"},
		"WebhookGuardFailClosedWebhookWithoutEndpoints": {firing: []string{"c/no-endpoints.example.io", "v1.down.example.com/service"},
			after: 5 * time.Minute, mapping: "app"},
	} {
		t.Run(alert, func(t *testing.T) {
			rule := alertingRule(t, groups, alert)
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
					if got := a.Labels.Get("mapping"); got != want.mapping {
						t.Errorf("%s's alert names mapping %q, want %q", key, got, want.mapping)
					}
				}
			}
			firing := slices.Sorted(func(yield func(string) bool) {
				for w := range firstFired {
					if !yield(w) {
						return
					}
				}
			})
			if !slices.Equal(firing, want.firing) {
				t.Errorf("firing for %v, want %v", firing, want.firing)
			}
			for w, at := range firstFired {
				if at != want.after {
					t.Errorf("%s fired after %s, want %s (the alert's for)", w, at, want.after)
				}
			}
		})
	}
}
