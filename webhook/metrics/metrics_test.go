package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// registered records the collectors registered with it.
type registered struct{ collectors []prometheus.Collector }

func (r *registered) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *registered) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *registered) Unregister(prometheus.Collector) bool { return false }

// descPattern reads a Desc's String(): its name, help and variable labels.
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: "((?:[^"\\]|\\.)*)", .*variableLabels: \{([^}]*)\}\}$`)

type series struct {
	help   string
	labels []string
}

// everySeries is every series the constructors register, by name.
func everySeries(t *testing.T) map[string]series {
	t.Helper()
	reg := &registered{}
	NewWebhook(reg)
	NewObserver(reg)
	NewRecords(reg)
	NewPolicySync(reg)
	NewProbe(reg)
	out := map[string]series{}
	for _, c := range reg.collectors {
		ch := make(chan *prometheus.Desc, 1)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			m := descPattern.FindStringSubmatch(d.String())
			require.NotNil(t, m, "unexpected Desc format %s", d)
			require.NotContains(t, out, m[1], "%s is defined twice", m[1])
			var labels []string
			if m[3] != "" {
				labels = strings.Split(m[3], ",")
			}
			out[m[1]] = series{help: m[2], labels: labels}
		}
	}
	return out
}

// Test_everySeries holds every series' name and labels: the e2e suite, the
// chart's PrometheusRules, dashboards and docs/observability.md use them, so
// a change here must be deliberate and made in all of them.
func Test_everySeries(t *testing.T) {
	want := map[string][]string{
		"webhook_guard_decisions_total":                           {"mapping", "rule", "decision"},
		"webhook_guard_records_total":                             {"mapping", "rule", "decision"},
		"webhook_guard_decision_duration_seconds":                 {"decision"},
		"webhook_guard_invalid_requests_total":                    nil,
		"webhook_guard_ca_source_errors_total":                    {"mapping", "source"},
		"webhook_guard_ca_live_rereads_total":                     {"outcome"},
		"webhook_guard_flapping_detected_total":                   {"mapping", "kind", "name"},
		"webhook_guard_write_budget_exceeded_total":               {"mapping", "mode"},
		"webhook_guard_config_reloads_total":                      {"result"},
		"webhook_guard_config_last_reload_successful":             nil,
		"webhook_guard_owner_ca_expiry_timestamp_seconds":         {"mapping"},
		"webhook_guard_observed_changes_total":                    {"mapping", "rule", "decision"},
		"webhook_guard_observed_flapping_total":                   {"mapping"},
		"webhook_guard_observer_events_total":                     {"type"},
		"webhook_guard_observer_queue_depth":                      nil,
		"webhook_guard_observer_decided_total":                    nil,
		"webhook_guard_webhook_info":                              {"kind", "configuration", "webhook", "failure_policy", "timeout_seconds", "mapping", "ca_fingerprint"},
		"webhook_guard_webhook_cabundle_expiry_timestamp_seconds": {"kind", "configuration", "webhook"},
		"webhook_guard_webhook_service_ready_endpoints":           {"kind", "configuration", "webhook", "service_namespace", "service_name"},
		"webhook_guard_report_writes_total":                       {"result"},
		"webhook_guard_trust_path_report_writes_total":            {"result"},
		"webhook_guard_trust_path_probe_rounds_total":             nil,
		"webhook_guard_events_total":                              {"reason"},
		"webhook_guard_report_results_dropped_total":              nil,
		"webhook_guard_report_results_abandoned_total":            {"reason"},
		"webhook_guard_policy_writes_total":                       {"kind", "verb"},
		"webhook_guard_policy_syncs_total":                        {"result"},
		"webhook_guard_policy_write_refusals_total":               {"mapping"},
		"webhook_guard_policy_mapping_refused":                    {"mapping"},
		"webhook_guard_policy_anchor_present":                     {"anchor"},
		"webhook_guard_policy_apply_conflicts_total":              {"mapping", "kind", "name"},
		"webhook_guard_policy_worst_write_cost_ratio":             {"mapping", "configuration"},
		"webhook_guard_trust_path_verified":                       {"kind", "configuration", "webhook"},
		"webhook_guard_trust_path_probe_failures_total":           {"kind", "configuration", "webhook", "reason"},
	}
	got := map[string][]string{}
	for name, s := range everySeries(t) {
		got[name] = s.labels
		assert.NotEmpty(t, s.help, "%s has no help", name)
	}
	assert.Equal(t, want, got)
}

// docsRow is a row of the metrics table in docs/observability.md: the
// series' name, then its labels (backquoted, values in parentheses).
var docsRow = regexp.MustCompile("^\\| `(webhook_guard_[a-z_]+)` \\|([^|]*)\\|")

// Test_docsListEverySeries checks that the metrics table of
// docs/observability.md lists every series with its labels, and no other.
func Test_docsListEverySeries(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	require.NoError(t, err)
	parens := regexp.MustCompile(`\([^)]*\)`)
	quoted := regexp.MustCompile("`([a-z_]+)`")
	documented := map[string][]string{}
	var previous []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		m := docsRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cell := parens.ReplaceAllString(m[2], "")
		var labels []string
		if strings.TrimSpace(cell) == "same" {
			labels = previous
		}
		for _, q := range quoted.FindAllStringSubmatch(cell, -1) {
			labels = append(labels, q[1])
		}
		documented[m[1]] = labels
		previous = labels
	}
	defined := map[string][]string{}
	for name, s := range everySeries(t) {
		defined[name] = s.labels
	}
	assert.Equal(t, defined, documented)
}
