package framework

import (
	"strings"
	"testing"
)

func Test_ParseMetrics(t *testing.T) {
	const exposition = `# HELP webhook_guard_decisions_total Admission decisions.
# TYPE webhook_guard_decisions_total counter
webhook_guard_decisions_total{decision="deny",mapping="enforced",rule="not-owner"} 3
webhook_guard_decisions_total{decision="allow",mapping="enforced",rule="none"} 2
webhook_guard_decisions_total{decision="audit",mapping="audited",rule="ca-mismatch"} 1
webhook_guard_invalid_requests_total 0
webhook_guard_ca_source_errors_total{mapping="m",source="Secret a/b (key \"ca.crt\"), retried"} 4
`
	m, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		name   string
		labels map[string]string
		want   float64
	}{
		"if no labels are given, sum every series":       {"webhook_guard_decisions_total", nil, 6},
		"if one label is given, sum the series with it":  {"webhook_guard_decisions_total", map[string]string{"mapping": "enforced"}, 5},
		"if all labels are given, return that series":    {"webhook_guard_decisions_total", map[string]string{"mapping": "enforced", "decision": "deny", "rule": "not-owner"}, 3},
		"if nothing matches, return 0":                   {"webhook_guard_decisions_total", map[string]string{"mapping": "other"}, 0},
		"if the metric has no labels, read its value":    {"webhook_guard_invalid_requests_total", nil, 0},
		"if a label value has quotes and commas, decode": {"webhook_guard_ca_source_errors_total", map[string]string{"source": `Secret a/b (key "ca.crt"), retried`}, 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := m.Sum(tc.name, tc.labels); got != tc.want {
				t.Errorf("Sum(%s, %v) = %g, want %g", tc.name, tc.labels, got, tc.want)
			}
		})
	}
}
