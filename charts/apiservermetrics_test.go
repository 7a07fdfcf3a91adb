package charts

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	admissionmetrics "k8s.io/apiserver/pkg/admission/metrics"
	manifestmetrics "k8s.io/apiserver/pkg/admission/plugin/manifest/metrics"
	endpointsmetrics "k8s.io/apiserver/pkg/endpoints/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"sigs.k8s.io/yaml"
)

var apiserverMetric = regexp.MustCompile(`\b(apiserver_[a-z_]+)(\{[^}]*\})?`)

// alertRule is one rule of the rendered PrometheusRule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	Annotations map[string]string `json:"annotations"`
}

func renderedAlerts(t *testing.T, valueSet ...string) []alertRule {
	t.Helper()
	set := "static"
	if len(valueSet) > 0 {
		set = valueSet[0]
	}
	out, err := helm(t, templateArgs(chartDir, valueSets[set], "--show-only", "templates/prometheusrule.yaml", "--set", "monitoring.prometheusRule.enabled=true")...)
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []alertRule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(out), "---")), &rule); err != nil {
		t.Fatal(err)
	}
	var all []alertRule
	for _, g := range rule.Spec.Groups {
		all = append(all, g.Rules...)
	}
	return all
}

// kubeAPIServerLabels records one sample of each kube-apiserver metric the
// alerts read, through the functions kube-apiserver itself calls (k8s.io/apiserver
// at the version the guard is built with), and returns every gathered
// metric's label names. A metric renamed upstream disappears from here.
func kubeAPIServerLabels(t *testing.T) map[string][]string {
	t.Helper()
	ctx := context.Background() // the metrics functions ignore cancellation
	admissionmetrics.Metrics.ObserveWebhookRejection(ctx, "guard.webhook-guard.io", "validating", "UPDATE", admissionmetrics.WebhookRejectionCallingWebhookError, 500)
	admissionmetrics.Metrics.ObserveWebhookFailOpen(ctx, "break-glass.webhook-guard.io", "validating")
	attrs := admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "", "x",
		schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}, "", admission.Update, nil, false, nil)
	admissionmetrics.Metrics.ObserveWebhook(ctx, "guard.webhook-guard.io", time.Millisecond, false, attrs, "validating", 200)
	manifestmetrics.RegisterMetrics()
	manifestmetrics.RecordAutomaticReloadFailure(manifestmetrics.ValidatingWebhookManifestType, "apiserver-a")
	manifestmetrics.RecordAutomaticReloadSuccess(manifestmetrics.ValidatingWebhookManifestType, "apiserver-a", "sha256:0")
	endpointsmetrics.Register()
	endpointsmetrics.MonitorRequest(httptest.NewRequest(http.MethodPatch, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/x", nil),
		"PATCH", "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "", "resource", "", false, "", 409, 0, time.Millisecond)

	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(out[f.GetName()], l.GetName()) {
					out[f.GetName()] = append(out[f.GetName()], l.GetName())
				}
			}
		}
		if f.GetType() == dto.MetricType_HISTOGRAM {
			// The series a query reads: le is the bucket's bound.
			out[f.GetName()+"_bucket"] = append(slices.Clone(out[f.GetName()]), "le")
			out[f.GetName()+"_sum"] = out[f.GetName()]
			out[f.GetName()+"_count"] = out[f.GetName()]
		}
	}
	return out
}

// webhookTypes maps each webhook configuration kind to the type label
// kube-apiserver's apiserver_admission_webhook_* series give its entries:
// the value its dispatcher of that kind passes (k8s.io/apiserver's
// plugin/webhook/{validating,mutating}/dispatcher.go, at the version in
// go.mod). The metric's help says "validate or admit"; the dispatchers
// pass "validating" and "admit", and a join on the help's word would match
// nothing.
func webhookTypes(t *testing.T) map[string]string {
	t.Helper()
	dir, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/apiserver").Output()
	if err != nil {
		t.Fatal(err)
	}
	passed := regexp.MustCompile(`admissionmetrics\.Metrics\.ObserveWebhook(?:Rejection|FailOpen)?\(ctx, [a-zA-Z.]+, (?:[a-zA-Z.()]+, [a-zA-Z.]+, )?"([a-z]+)"`)
	out := map[string]string{}
	for kind, plugin := range map[string]string{"ValidatingWebhookConfiguration": "validating", "MutatingWebhookConfiguration": "mutating"} {
		src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "pkg", "admission", "plugin", "webhook", plugin, "dispatcher.go"))
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, m := range passed.FindAllStringSubmatch(string(src), -1) {
			types = append(types, m[1])
		}
		slices.Sort(types)
		if types = slices.Compact(types); len(types) != 1 {
			t.Fatalf("the %s dispatcher records webhook metrics with types %v, want exactly one", plugin, types)
		}
		out[kind] = types[0]
	}
	return out
}

// Test_prometheusRuleNamesRealAPIServerMetrics: every apiserver_* series an
// alert reads, and every label it selects, is one kube-apiserver exports
// (checked against the k8s.io/apiserver source, not a list typed here);
// Test_prometheusRuleNamesRealMetrics checks the labels alerts group by
// and join on against the same definitions.
func Test_prometheusRuleNamesRealAPIServerMetrics(t *testing.T) {
	if checked := checkAlertMetrics(t, renderedAlerts(t), apiserverMetric, knownLabels(t), "kube-apiserver"); checked < 4 {
		t.Fatalf("expected the write-storm, reachability, reload and drift alerts to read kube-apiserver metrics, checked %d series", checked)
	}
}

// Test_everyAlertHasARunbook: each alert's runbook_url points into
// docs/runbooks.md at a heading that exists there.
func Test_everyAlertHasARunbook(t *testing.T) {
	doc, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for line := range strings.SplitSeq(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			anchors[githubAnchor(h)] = true
		}
	}
	// Both shapes: each adds alerts of its own.
	alerts := append(renderedAlerts(t, "static"), renderedAlerts(t, "policy")...)
	if len(alerts) == 0 {
		t.Fatal("no alerts rendered")
	}
	for _, r := range alerts {
		url := r.Annotations["runbook_url"]
		base, anchor, ok := strings.Cut(url, "#")
		if !ok || !strings.HasSuffix(base, "/docs/runbooks.md") {
			t.Errorf("alert %s: runbook_url %q does not point into docs/runbooks.md", r.Alert, url)
			continue
		}
		if !anchors[anchor] {
			t.Errorf("alert %s: docs/runbooks.md has no heading for #%s", r.Alert, anchor)
		}
		if anchor != strings.ToLower(r.Alert) {
			t.Errorf("alert %s: runbook anchor #%s is not the alert's name", r.Alert, anchor)
		}
	}
}

// githubAnchor is the id GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}
