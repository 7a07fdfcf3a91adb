package probe

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

func Test_Reporter_Report(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r := &Reporter{Metrics: metrics.NewProbe(reg)}
	path := func(cfg string) TrustPath {
		return TrustPath{Kind: "ValidatingWebhookConfiguration", Configuration: cfg, Webhook: "w.example.com"}
	}
	r.Report([]Result{{Path: path("a")}, {Path: path("b"), Reason: ReasonUnknownAuthority}})
	r.Report([]Result{{Path: path("b"), Reason: ReasonUnknownAuthority}})
	want := `
# HELP webhook_guard_trust_path_probe_failures_total Failed probes of guarded entries' trust paths, by entry and reason (unknown-authority, expired, name-mismatch, unreachable, no-endpoints, no-ca-bundle).
# TYPE webhook_guard_trust_path_probe_failures_total counter
webhook_guard_trust_path_probe_failures_total{configuration="b",kind="ValidatingWebhookConfiguration",reason="unknown-authority",webhook="w.example.com"} 2
# HELP webhook_guard_trust_path_probe_rounds_total Probe rounds the leader completed and reported (every guarded entry probed once each).
# TYPE webhook_guard_trust_path_probe_rounds_total counter
webhook_guard_trust_path_probe_rounds_total 2
# HELP webhook_guard_trust_path_verified 1 when a guarded entry's caBundle verified the certificate chain its endpoint served at the leader's last probe, 0 when it did not.
# TYPE webhook_guard_trust_path_verified gauge
webhook_guard_trust_path_verified{configuration="b",kind="ValidatingWebhookConfiguration",webhook="w.example.com"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)),
		"the series of a, no longer probed, are deleted; b's failures add up; both rounds count")

	r.Report([]Result{{Path: path("b")}})
	require.Equal(t, 1.0, testutil.ToFloat64(r.Metrics.Verified.WithLabelValues("ValidatingWebhookConfiguration", "b", "w.example.com")),
		"a path that verifies again is 1")
}
