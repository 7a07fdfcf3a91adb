package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"
)

// touch gives every vector one child, so that Gather reports its family.
func touch(t *testing.T, c prometheus.Collector) {
	t.Helper()
	ch := make(chan *prometheus.Desc, 1)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var labels int
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		require.NotNil(t, m, "unexpected Desc format %s", d)
		if m[3] != "" {
			labels = len(strings.Split(m[3], ","))
		}
	}
	values := make([]string, labels)
	for i := range values {
		values[i] = "x"
	}
	switch v := c.(type) {
	case *prometheus.CounterVec:
		v.WithLabelValues(values...)
	case *prometheus.GaugeVec:
		v.WithLabelValues(values...)
	case *prometheus.HistogramVec:
		v.WithLabelValues(values...).Observe(0)
	case *WebhookHealth:
		v.SetSource(func() []WebhookEntry {
			return []WebhookEntry{{Kind: "ValidatingWebhookConfiguration", Configuration: "c", Webhook: "w", FailurePolicy: "Fail",
				TimeoutSeconds: "10", CAFingerprint: "f", CAExpiry: time.Unix(1, 0),
				ServiceNamespace: "ns", ServiceName: "s", ReadyEndpoints: 1, EndpointsKnown: true}}
		})
	}
}

// Test_promlint runs Prometheus's own metric linter (promlint, the rules
// golangci-lint's promlinter applies to literal options) over every series
// as a scrape would show it: the definitions are built by small
// constructors, which a static linter cannot read through.
func Test_promlint(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &registered{}
	NewWebhook(rec)
	NewObserver(rec)
	NewRecords(rec)
	NewPolicySync(rec)
	NewProbe(rec)
	for _, c := range rec.collectors {
		touch(t, c)
		require.NoError(t, reg.Register(c))
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, mfs, len(everySeries(t)), "every series is gathered")
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	require.Empty(t, problems)
}
