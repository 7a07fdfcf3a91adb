package charts

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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
	}
	return out
}

// Test_prometheusRuleNamesRealAPIServerMetrics: every apiserver_* series an
// alert reads, and every label it selects or groups by, is one kube-apiserver
// exports (checked against the k8s.io/apiserver source, not a list typed here).
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
