package observe

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/webhook/metrics"
)

// healthSeries gathers the health series of reg as "name{labels} value"
// lines, sorted.
func healthSeries(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var out []string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "webhook_guard_webhook_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out = append(out, fmt.Sprintf("%s{%s} %v", f.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

// appConfig is a GuardConfig whose mapping "app" owns the validating
// configuration "guarded" with the CA owner; top adds top-level fields.
func appConfig(tb testing.TB, owner []byte, top string) *policy.Mappings {
	tb.Helper()
	cfg, err := policy.Load([]byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
` + top + `owners:
- name: app
  match: {validating: [guarded]}
  writers: {serviceAccounts: [app/controller]}
  ca:
    pem: |
` + testpki.Indent(string(owner), 6) + "\n"))
	require.NoError(tb, err)
	return cfg
}

func Test_healthSource(t *testing.T) {
	notAfter := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	early := testpki.MustCA(t, "early", testpki.WithValidity(notAfter.Add(-time.Hour*24*365), notAfter))
	late := testpki.MustCA(t, "late", testpki.WithValidity(notAfter.Add(-time.Hour*24*365), notAfter.AddDate(1, 0, 0)))
	ignore, timeout := admv1.Ignore, int32(3)
	fail := admv1.Fail
	short := func(ca *testpki.CA) string {
		fps, err := cabundle.Parse(ca.PEM)
		require.NoError(t, err)
		return fps[0].Short()
	}

	vwcs, mwcs := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	assert.Empty(t, healthSeries(t, reg), "no source, no series")
	m.Health.SetSource(healthSource(staticConfig{appConfig(t, testpki.MustCA(t, "owner-ca").PEM, "")}, readyEndpoints{}.count, vwcs, mwcs))

	guarded := &admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}, Webhooks: []admv1.ValidatingWebhook{
		{Name: "a.example.io", FailurePolicy: &fail, ClientConfig: admv1.WebhookClientConfig{CABundle: slices.Concat(late.PEM, early.PEM)}},
		{Name: "b.example.io", FailurePolicy: &ignore, TimeoutSeconds: &timeout},
	}}
	other := &admv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Webhooks: []admv1.MutatingWebhook{
		{Name: "m.example.io", ClientConfig: admv1.WebhookClientConfig{CABundle: []byte("not PEM")}},
	}}
	require.NoError(t, vwcs.Add(guarded))
	require.NoError(t, mwcs.Add(other))
	both := strings.Join(slices.Sorted(slices.Values([]string{short(early), short(late)})), ",")
	assert.Equal(t, []string{
		`webhook_guard_webhook_cabundle_expiry_timestamp_seconds{configuration="guarded",kind="ValidatingWebhookConfiguration",webhook="a.example.io"} ` + fmt.Sprint(float64(notAfter.Unix())),
		`webhook_guard_webhook_info{ca_fingerprint="",configuration="guarded",failure_policy="Ignore",kind="ValidatingWebhookConfiguration",mapping="app",timeout_seconds="3",webhook="b.example.io"} 1`,
		`webhook_guard_webhook_info{ca_fingerprint="` + both + `",configuration="guarded",failure_policy="Fail",kind="ValidatingWebhookConfiguration",mapping="app",timeout_seconds="10",webhook="a.example.io"} 1`,
		`webhook_guard_webhook_info{ca_fingerprint="invalid",configuration="other",failure_policy="Fail",kind="MutatingWebhookConfiguration",mapping="",timeout_seconds="10",webhook="m.example.io"} 1`,
	}, healthSeries(t, reg), "every entry of every configuration, mapped or not; an expiry only for a bundle with certificates")

	updated := guarded.DeepCopy()
	updated.Webhooks = updated.Webhooks[:1]
	updated.Webhooks[0].ClientConfig.CABundle = late.PEM
	require.NoError(t, vwcs.Update(updated))
	require.NoError(t, mwcs.Delete(other))
	assert.Equal(t, []string{
		`webhook_guard_webhook_cabundle_expiry_timestamp_seconds{configuration="guarded",kind="ValidatingWebhookConfiguration",webhook="a.example.io"} ` + fmt.Sprint(float64(notAfter.AddDate(1, 0, 0).Unix())),
		`webhook_guard_webhook_info{ca_fingerprint="` + short(late) + `",configuration="guarded",failure_policy="Fail",kind="ValidatingWebhookConfiguration",mapping="app",timeout_seconds="10",webhook="a.example.io"} 1`,
	}, healthSeries(t, reg), "a changed entry changes its series; a removed entry and a deleted configuration leave none")

	m.Health.SetSource(nil)
	assert.Empty(t, healthSeries(t, reg), "a stopped watch exports nothing")
}

func Test_parseBundleHealth(t *testing.T) {
	var bundle []byte
	for i := range maxFingerprintLabel + 2 {
		bundle = append(bundle, testpki.MustCA(t, fmt.Sprint("ca-", i)).PEM...)
	}
	label := parseBundleHealth(bundle).fingerprint
	assert.Len(t, strings.Split(label, ","), maxFingerprintLabel+1, "at most three fingerprints, then the count of the others")
	assert.True(t, strings.HasSuffix(label, ",+2"), label)
}

// startObserver runs an observer of client, with the mapping "app", until
// the test ends, after applying opts to it; it returns the registry of its
// metrics.
func startObserver(t *testing.T, client *fake.Clientset, opts ...func(*Observer)) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := appConfig(t, testpki.MustCA(t, "owner-ca").PEM, "")
	o := &Observer{Kube: client, Config: staticConfig{cfg}, Decider: policyDecider{cfg: cfg}, Recorder: &recorded{},
		Metrics: NewMetrics(reg), Log: logr.Discard(), MismatchGrace: -1}
	for _, opt := range opts {
		opt(o)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- o.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return reg
}

func Test_Observer_health(t *testing.T) {
	ca := testpki.MustCA(t, "ca")
	client := fake.NewClientset(&admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
		Webhooks: []admv1.ValidatingWebhook{{Name: "a.example.io", ClientConfig: admv1.WebhookClientConfig{CABundle: ca.PEM}}}})
	reg := startObserver(t, client)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, healthSeries(t, reg), 2)
	}, 10*time.Second, 10*time.Millisecond, "the leader's watch is exported")
	require.NoError(t, client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(t.Context(), "guarded", metav1.DeleteOptions{}))
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, healthSeries(t, reg))
	}, 10*time.Second, 10*time.Millisecond, "a deleted configuration leaves no series")
}

func Test_boundEntries(t *testing.T) {
	entry := func(name, mapping string) metrics.WebhookEntry {
		return metrics.WebhookEntry{Kind: "ValidatingWebhookConfiguration", Configuration: name, Webhook: "w", Mapping: mapping}
	}
	names := func(es []metrics.WebhookEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Configuration)
		}
		return out
	}
	tests := map[string]struct {
		in    []metrics.WebhookEntry
		limit int
		exp   []string
	}{
		"if the cluster holds fewer entries than the bound, every one is described, sorted": {
			in: []metrics.WebhookEntry{entry("c", ""), entry("a", "app"), entry("b", "")}, limit: 3, exp: []string{"a", "b", "c"},
		},
		"if it holds more, the guarded entries are kept first, then the others in order": {
			in:    []metrics.WebhookEntry{entry("d", ""), entry("z-guarded", "app"), entry("a", ""), entry("b", ""), entry("y-guarded", "other")},
			limit: 3, exp: []string{"a", "y-guarded", "z-guarded"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.exp, names(boundEntries(tc.in, tc.limit)))
		})
	}
}
