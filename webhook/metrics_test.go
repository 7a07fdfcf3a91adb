package webhook

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These helpers do what prometheus/testutil's ToFloat64 and CollectAndCount
// do. testutil itself needs github.com/kylelemons/godebug in go.mod, which
// the module does not require (yet).

// collect gathers what c exposes.
func collect(c prometheus.Collector) []*dto.Metric {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var out []*dto.Metric
	for m := range ch {
		pb := &dto.Metric{}
		if err := m.Write(pb); err != nil {
			panic(err)
		}
		out = append(out, pb)
	}
	return out
}

// collectAndCount is the number of series c exposes.
func collectAndCount(c prometheus.Collector) int { return len(collect(c)) }

// toFloat64 is the value of the one series c exposes (a histogram's sample
// count).
func toFloat64(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ms := collect(c)
	require.Len(t, ms, 1, "expected exactly one series")
	m := ms[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("unsupported metric %v", m)
	return 0
}

func Test_NewMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.InvalidRequests.Inc()
	m.Decisions.WithLabelValues("koordinator", "none", "allow").Inc()
	m.Records.WithLabelValues("koordinator", "not-owner", "deny").Inc()
	m.DecisionDuration.WithLabelValues("allow").Observe(0.001)
	m.CASourceErrors.WithLabelValues("koordinator", "Secret a/b (key ca.crt)").Inc()
	m.CALiveRereads.WithLabelValues("rotated").Inc()
	m.FlappingDetected.WithLabelValues("koordinator", "ValidatingWebhookConfiguration", "koord").Inc()
	m.ConfigReloads.WithLabelValues("success").Inc()

	families, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	assert.Equal(t, []string{
		"webhook_guard_ca_live_rereads_total",
		"webhook_guard_ca_source_errors_total",
		"webhook_guard_config_last_reload_successful",
		"webhook_guard_config_reloads_total",
		"webhook_guard_decision_duration_seconds",
		"webhook_guard_decisions_total",
		"webhook_guard_flapping_detected_total",
		"webhook_guard_invalid_requests_total",
		"webhook_guard_records_total",
	}, names)
	assert.Equal(t, 1.0, toFloat64(t, m.ConfigLastReloadSuccess), "a fresh guard reports its (initial) load as successful")
	assert.Panics(t, func() { NewMetrics(reg) }, "registering twice is a programming error")
}
