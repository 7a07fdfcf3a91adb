package charts

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhook-guard/webhook-guard/webhook"
	"github.com/webhook-guard/webhook-guard/webhook/metrics"
	"github.com/webhook-guard/webhook-guard/webhook/records"
)

var (
	guardMetric   = regexp.MustCompile(`\b(webhook_guard_[a-z_]+)(\{[^}]*\})?`)
	selectorLabel = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)`)
)

// Test_prometheusRuleNamesRealMetrics: every webhook_guard_* series an
// alert of the chart's PrometheusRule reads is one the guard registers, and
// every label the alert selects is one of that metric's; every label it
// groups by, joins on or copies is one of the series it comes from, the
// guard's or kube-apiserver's. A misspelled name or label would not fail in Prometheus: the
// alert would just never fire.
func Test_prometheusRuleNamesRealMetrics(t *testing.T) {
	alerts, known := renderedAlerts(t), knownLabels(t)
	if checked := checkAlertMetrics(t, alerts, guardMetric, known, "the guard"); checked == 0 {
		t.Fatal("no webhook_guard_* series found in the PrometheusRule")
	}
	for _, r := range alerts {
		checkQueryLabels(t.Errorf, "alert "+r.Alert, r.Expr, known)
	}
}

// checkAlertMetrics checks every series matching pattern in the alerts'
// expressions against known (metric name -> label names, of the guard's
// and kube-apiserver's series): source exports it and it selects only its
// labels. It returns how many series it checked.
func checkAlertMetrics(t *testing.T, alerts []alertRule, pattern *regexp.Regexp, known map[string][]string, source string) int {
	t.Helper()
	checked := 0
	for _, r := range alerts {
		// Label names in by (...) and on (...) can look like metric names;
		// checkQueryLabels checks them as labels.
		matches := pattern.FindAllStringSubmatch(promqlGrouping.ReplaceAllString(r.Expr, ""), -1)
		for _, m := range matches {
			name := m[1]
			labels, ok := known[name]
			if !ok {
				t.Errorf("alert %s reads %s, which %s does not export", r.Alert, name, source)
				continue
			}
			checked++
			for _, u := range selectorLabel.FindAllStringSubmatch(m[2], -1) {
				if !slices.Contains(labels, u[1]) {
					t.Errorf("alert %s uses label %q of %s, which has only %v", r.Alert, u[1], name, labels)
				}
			}
		}
	}
	return checked
}

// knownLabels maps every series the guard registers and every
// kube-apiserver series the chart reads to its label names.
func knownLabels(t *testing.T) map[string][]string {
	t.Helper()
	out := kubeAPIServerLabels(t)
	maps.Copy(out, registeredLabels(t))
	return out
}

// registeredLabels maps each metric the guard registers to its label names.
func registeredLabels(t *testing.T) map[string][]string {
	t.Helper()
	reg := &collectors{}
	webhook.NewMetrics(reg)
	records.NewMetrics(reg)
	metrics.NewObserver(reg)
	metrics.NewProbe(reg)
	descs := make(chan *prometheus.Desc)
	go func() {
		for _, c := range reg.all {
			c.Describe(descs) // unlike Gather, needs no samples
		}
		close(descs)
	}()
	out := map[string][]string{}
	for d := range descs {
		// Desc has no accessors; String() prints fqName: "..." and
		// variableLabels: {a,b} (help text comes before the labels).
		s := d.String()
		name := s[strings.Index(s, `fqName: "`)+len(`fqName: "`):]
		name = name[:strings.IndexByte(name, '"')]
		vl := s[strings.LastIndex(s, "variableLabels: {")+len("variableLabels: {"):]
		out[name] = strings.Split(vl[:strings.IndexByte(vl, '}')], ",")
	}
	if len(out) == 0 {
		t.Fatal("the guard registers no metrics")
	}
	return out
}

// collectors is a Registerer that keeps what is registered.
type collectors struct{ all []prometheus.Collector }

func (c *collectors) Register(col prometheus.Collector) error {
	c.all = append(c.all, col)
	return nil
}
func (c *collectors) MustRegister(cols ...prometheus.Collector) { c.all = append(c.all, cols...) }
func (c *collectors) Unregister(prometheus.Collector) bool      { return false }
