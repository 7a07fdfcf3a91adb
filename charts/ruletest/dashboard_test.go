package ruletest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// dashboardJoins are the dashboard's queries that join kube-apiserver's
// apiserver_admission_webhook_* series with webhook_guard_webhook_info.
func dashboardJoins(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "webhook-guard", "files", "dashboards", "webhook-guard.json"))
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []panel `json:"panels"`
	}
	var dashboard struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, target := range p.Targets {
				if strings.Contains(target.Expr, "apiserver_admission_webhook_") && strings.Contains(target.Expr, "webhook_guard_webhook_info") {
					out[p.Title] = strings.ReplaceAll(target.Expr, "$__rate_interval", "5m")
				}
			}
			walk(p.Panels)
		}
	}
	walk(dashboard.Panels)
	if len(out) == 0 {
		t.Fatal("the dashboard has no panel joining kube-apiserver's webhook series")
	}
	return out
}

// Test_dashboardJoinsWithTrustObjects: every CRD's entry is named
// "conversion" and every APIService's "service". Two of them with
// different owner mappings would make the joins' right-hand side ambiguous,
// which Prometheus refuses for the whole query; the joins select the
// admission kinds, and still answer for the admission webhook.
func Test_dashboardJoinsWithTrustObjects(t *testing.T) {
	crd := func(name, mapping string) metrics.WebhookEntry {
		return entry("conversion", func(e *metrics.WebhookEntry) {
			e.Kind, e.Configuration, e.Mapping, e.TimeoutSeconds = "CustomResourceDefinition", name, mapping, ""
		})
	}
	apiService := func(name, mapping string) metrics.WebhookEntry {
		return entry("service", func(e *metrics.WebhookEntry) {
			e.Kind, e.Configuration, e.Mapping, e.TimeoutSeconds = "APIService", name, mapping, ""
		})
	}
	health := load(t, []metrics.WebhookEntry{
		entry("a.example.io", nil),
		crd("widgets.example.com", "app"), crd("gadgets.example.com", ""),
		apiService("v1beta1.metrics.example.com", "app"), apiService("v1beta1.custom.example.com", ""),
	})
	// kube-apiserver's series for the validating entry, and for names a
	// CRD's or an APIService's entry has (an admission webhook may be named
	// so too).
	apiserver := ""
	for _, name := range []string{"a.example.io", "conversion", "service"} {
		l := `name="` + name + `",operation="CREATE",rejection_code="500",type="validating"`
		apiserver += `  apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",` + l + `} 0+1x40
  apiserver_admission_webhook_fail_open_count{` + l + `} 0+1x40
  apiserver_admission_webhook_admission_duration_seconds_bucket{le="1",` + l + `} 0+1x40
  apiserver_admission_webhook_admission_duration_seconds_bucket{le="+Inf",` + l + `} 0+1x40
`
	}
	storage := promqltest.LoadedStorage(t, health+apiserver)
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	at := start.Add(20 * time.Minute)
	for title, expr := range dashboardJoins(t) {
		t.Run(title, func(t *testing.T) {
			q, err := engine.NewInstantQuery(t.Context(), storage, nil, expr, at)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			res := q.Exec(t.Context())
			if res.Err != nil {
				t.Fatalf("%s: %v", expr, res.Err)
			}
			vector, err := res.Vector()
			if err != nil {
				t.Fatal(err)
			}
			if len(vector) != 1 || vector[0].Metric.Get("name") != "a.example.io" || vector[0].Metric.Get("mapping") != "app" {
				t.Errorf("got %v, want the validating entry a.example.io of mapping app alone", vector)
			}
		})
	}
}
