package charts

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// dashboardTarget is one PromQL query of the dashboard.
type dashboardTarget struct {
	panel, expr string
}

// renderedDashboard renders the dashboard ConfigMap and returns its labels
// and every query of its panels.
func renderedDashboard(t *testing.T) (map[string]string, []dashboardTarget) {
	t.Helper()
	out, err := helm(t, templateArgs(chartDir, valueSets["static"], "--show-only", "templates/dashboard.yaml", "--set", "monitoring.dashboards.enabled=true")...)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(out), "---")), &cm); err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(cm.Data["webhook-guard.json"]), &dashboard); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var targets []dashboardTarget
	for _, p := range dashboard.Panels {
		for _, tg := range p.Targets {
			targets = append(targets, dashboardTarget{panel: p.Title, expr: tg.Expr})
		}
	}
	return cm.Metadata.Labels, targets
}

// promqlWords are PromQL's functions, aggregations and keywords the
// dashboard uses; any other word in an expression must be a series name.
var promqlWords = []string{
	"sum", "min", "max", "avg", "count", "topk", "bottomk", "sort", "sort_desc",
	"rate", "irate", "increase", "delta", "time", "label_replace", "histogram_quantile", "and", "or", "unless",
}

var (
	promqlString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlSelector = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlWord     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// seriesNames are the words of expr that name series: what is left once
// strings, selectors, ranges, groupings and PromQL's own words are gone.
func seriesNames(expr string) []string {
	rest := promqlString.ReplaceAllString(expr, `""`)
	rest = promqlSelector.ReplaceAllString(rest, " ")
	rest = promqlGrouping.ReplaceAllString(rest, " ")
	var out []string
	for _, w := range promqlWord.FindAllString(rest, -1) {
		if !slices.Contains(promqlWords, w) {
			out = append(out, w)
		}
	}
	return out
}

// Test_dashboardNamesRealMetrics: the dashboard ConfigMap carries the
// sidecar's label, and every expression of its panels reads only series
// the guard registers or kube-apiserver's apiserver_admission_webhook_*
// (checked against k8s.io/apiserver), with labels those series have: the
// labels it selects, and those it groups by, joins on or copies
// (checkQueryLabels). A misspelled name or join label would not fail in
// Grafana: the panel would just stay empty.
func Test_dashboardNamesRealMetrics(t *testing.T) {
	labels, targets := renderedDashboard(t)
	if labels["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard ConfigMap has labels %v, not grafana_dashboard: \"1\"", labels)
	}
	if len(targets) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	guard, apiserver := registeredLabels(t), kubeAPIServerLabels(t)
	var rules []alertRule
	for _, tg := range targets {
		rules = append(rules, alertRule{Alert: "panel " + tg.panel, Expr: tg.expr})
		for _, name := range seriesNames(tg.expr) {
			_, ours := guard[name]
			_, theirs := apiserver[name]
			if !ours && !(theirs && strings.HasPrefix(name, "apiserver_admission_webhook_")) {
				t.Errorf("panel %q reads %s, which is neither the guard's nor kube-apiserver's apiserver_admission_webhook_*", tg.panel, name)
			}
		}
	}
	known := knownLabels(t)
	if checkAlertMetrics(t, rules, guardMetric, known, "the guard") == 0 {
		t.Error("no panel reads a webhook_guard_* series")
	}
	checkAlertMetrics(t, rules, apiserverMetric, known, "kube-apiserver")
	for _, r := range rules {
		checkQueryLabels(t.Errorf, r.Alert, r.Expr, known)
	}
}

// Test_dashboardJoinsMatchKubeAPIServer: a panel that joins kube-apiserver's
// apiserver_admission_webhook_* series with webhook_guard_webhook_info
// matches on kube-apiserver's name and type, and makes type from the
// guard's kind with the values kube-apiserver's dispatchers record, for
// both kinds (checked against k8s.io/apiserver's source).
func Test_dashboardJoinsMatchKubeAPIServer(t *testing.T) {
	_, targets := renderedDashboard(t)
	types := webhookTypes(t)
	joins := 0
	for _, tg := range targets {
		if !strings.Contains(tg.expr, "apiserver_admission_webhook_") || !strings.Contains(tg.expr, "webhook_guard_webhook_info") {
			continue
		}
		joins++
		if !strings.Contains(tg.expr, "on (name, type)") {
			t.Errorf("panel %q joins kube-apiserver's series without matching on (name, type): %s", tg.panel, tg.expr)
		}
		made := map[string]string{}
		for _, r := range labelReplaces(tg.expr) {
			if r.dst == "type" {
				if r.src != "kind" {
					t.Errorf("panel %q makes type from %s, not kind", tg.panel, r.src)
				}
				made[r.regex] = r.replacement
			}
		}
		if !maps.Equal(made, types) {
			t.Errorf("panel %q makes type %v from kind; kube-apiserver records %v", tg.panel, made, types)
		}
	}
	if joins < 3 {
		t.Errorf("%d panels join kube-apiserver's webhook series with webhook_guard_webhook_info, want the rejections, fail-open and latency panels", joins)
	}
}

func Test_seriesNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (mapping) (rate(webhook_guard_decisions_total{decision="deny"}[$__rate_interval]))`:   {"webhook_guard_decisions_total"},
		`sort(min by (kind) (a_series) - time())`:                                                     {"a_series"},
		`x * on (name) group_left (mapping) label_replace(y{a="b"}, "name", "$1", "webhook", "(.*)")`: {"x", "y"},
	} {
		if got := seriesNames(expr); !slices.Equal(got, want) {
			t.Errorf("seriesNames(%q) = %v, want %v", expr, got, want)
		}
	}
}
