package observe

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
	"github.com/webhook-guard/webhook-guard/policy/flapping"
)

// policyDecider is the one seam mocked: it decides with the real policy
// code, with the owner's CA inline in the config instead of resolved, and
// caBundle parses memoized when fps is set (as webhook.Handler does).
type policyDecider struct {
	cfg *policy.Mappings
	fps *cabundle.FingerprintCache
}

func (p policyDecider) Decide(_ context.Context, in *policy.Input, _ time.Time) policy.Decision {
	in.Fingerprints = p.fps
	return p.cfg.Decide(in)
}

type recorded struct {
	mu        sync.Mutex
	decisions []policy.Decision
	flapping  []flapping.Report
}

func (r *recorded) RecordDecision(_ context.Context, d *policy.Decision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, *d)
}

func (r *recorded) RecordFlapping(_ context.Context, _ string, fr flapping.Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flapping = append(r.flapping, fr)
}

// vwc is a guarded configuration whose one entry "w.example.io" holds
// bundle, its caBundle owned by manager.
func vwc(rv string, bundle []byte, manager string, at time.Time) *admv1.ValidatingWebhookConfiguration {
	return &admv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{
			Name: "guarded", ResourceVersion: rv,
			Annotations: map[string]string{lastApplied: strings.Repeat("x", 1000), "team": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "creator", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:webhooks":{".":{},"k:{\"name\":\"w.example.io\"}":{".":{},"f:name":{},"f:rules":{}}}}`)},
				{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", Time: &metav1.Time{Time: at},
					FieldsV1: metav1.NewFieldsV1(`{"f:webhooks":{"k:{\"name\":\"w.example.io\"}":{"f:clientConfig":{"f:caBundle":{}}}}}`)},
			},
		},
		Webhooks: []admv1.ValidatingWebhook{{Name: "w.example.io", ClientConfig: admv1.WebhookClientConfig{CABundle: bundle}, SideEffects: nil}},
	}
}

func Test_Observer(t *testing.T) {
	owner := testpki.MustCA(t, "owner-ca").PEM
	foreign := make([][]byte, 4)
	for i := range foreign {
		foreign[i] = testpki.MustCA(t, fmt.Sprintf("replica-%d-ca", i)).PEM
	}
	cfg := appConfig(t, owner, "defaultMode: audit\nflapping: {maxDistinctBundles: 3, window: 10m}\n")
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)

	// setup builds an observer and its watch handler.
	setup := func() (*Observer, *recorded, toolscache.ResourceEventHandler) {
		rec := &recorded{}
		o := &Observer{Config: staticConfig{cfg}, Decider: policyDecider{cfg: cfg}, Recorder: rec,
			Metrics: NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return at }, MismatchGrace: -1}
		return o, rec, draining{o: o, ctx: t.Context(), h: o.handler(t.Context())}
	}

	t.Run("if the initial list holds a foreign CA, nothing is recorded: existing objects are the baseline", func(t *testing.T) {
		o, rec, h := setup()
		h.OnAdd(vwc("1", foreign[0], "replica-0", at), true)
		assert.Empty(t, rec.decisions)
		assert.Equal(t, 0.0, testutil.ToFloat64(o.Metrics.Events.WithLabelValues("add")))
	})
	t.Run("if a change writes a foreign CA, it is recorded as observed, attributed to the field manager that owns caBundle", func(t *testing.T) {
		o, rec, h := setup()
		h.OnUpdate(vwc("1", owner, "app-controller", at), vwc("2", foreign[0], "replica-0", at))
		require.Len(t, rec.decisions, 1)
		d := rec.decisions[0]
		assert.True(t, d.Observed)
		assert.Equal(t, policy.OutcomeAudit, d.Outcome)
		assert.Equal(t, policy.RuleCAMismatch, d.Rule)
		assert.Equal(t, "fieldManager:replica-0", d.Subject)
		assert.Equal(t, []policy.FieldManager{{Name: "replica-0", Operation: "Update", Time: at}}, d.FieldManagers)
		assert.Equal(t, 1.0, testutil.ToFloat64(o.Metrics.Changes.WithLabelValues("app", "ca-mismatch", "audit")))
	})
	t.Run("if a configuration is created after the initial list with a foreign CA, it is a CREATE", func(t *testing.T) {
		_, rec, h := setup()
		h.OnAdd(vwc("3", foreign[1], "replica-1", at), false)
		require.Len(t, rec.decisions, 1)
		assert.Equal(t, policy.OperationCreate, rec.decisions[0].Operation)
	})
	t.Run("if the owner writes its own CA, it is counted and not recorded", func(t *testing.T) {
		o, rec, h := setup()
		h.OnUpdate(vwc("1", foreign[0], "replica-0", at), vwc("2", owner, "app-controller", at))
		assert.Empty(t, rec.decisions)
		assert.Equal(t, 1.0, testutil.ToFloat64(o.Metrics.Changes.WithLabelValues("app", "none", "allow")))
	})
	t.Run("if a relist delivers an unchanged object or a change leaves caBundle alone, nothing is decided", func(t *testing.T) {
		o, rec, h := setup()
		h.OnUpdate(vwc("1", foreign[0], "replica-0", at), vwc("1", foreign[0], "replica-0", at))
		h.OnUpdate(vwc("1", foreign[0], "replica-0", at), vwc("2", foreign[0], "replica-0", at))
		assert.Empty(t, rec.decisions)
		assert.Equal(t, 0, testutil.CollectAndCount(o.Metrics.Changes))
	})
	t.Run("if more distinct CAs than allowed are written within the window, flapping is reported once, observed, with the field managers", func(t *testing.T) {
		o, rec, h := setup()
		prev := vwc("1", owner, "app-controller", at)
		for i, b := range slices.Concat(foreign, foreign) {
			next := vwc(fmt.Sprint(i+2), b, fmt.Sprintf("replica-%d", i%len(foreign)), at)
			h.OnUpdate(prev, next)
			prev = next
		}
		require.Len(t, rec.flapping, 1)
		assert.Equal(t, flapping.Report{Kind: policy.KindValidating, Name: "guarded", DistinctBundles: 4, Window: 10 * time.Minute, Observed: true,
			Writers: []string{"fieldManager:replica-0", "fieldManager:replica-1", "fieldManager:replica-2", "fieldManager:replica-3"}}, rec.flapping[0])
		assert.Equal(t, 1.0, testutil.ToFloat64(o.Metrics.Flapping.WithLabelValues("app")))

		// A deletion forgets the configuration: its successor starts clean.
		h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "guarded", Obj: prev})
		h.OnUpdate(vwc("20", owner, "app-controller", at), vwc("21", foreign[0], "replica-0", at))
		assert.Len(t, rec.flapping, 1)
	})
}

// draining is the observer's event handler followed by deciding what it
// queued, so that a test reads the records of an event right after it.
type draining struct {
	o   *Observer
	ctx context.Context
	h   toolscache.ResourceEventHandler
}

func (d draining) drain() {
	for d.o.queue.Len() > 0 {
		d.o.processNext(d.ctx)
	}
}

func (d draining) OnAdd(obj any, initial bool) { d.h.OnAdd(obj, initial); d.drain() }
func (d draining) OnUpdate(old, cur any)       { d.h.OnUpdate(old, cur); d.drain() }
func (d draining) OnDelete(obj any)            { d.h.OnDelete(obj); d.drain() }

// auditConfig is the audit-mode mapping "app" of the validating
// configurations names, written by app/controller, whose CA is ca inline.
func auditConfig(t testing.TB, ca []byte, names ...string) *policy.Mappings {
	t.Helper()
	cfg, err := policy.Load([]byte(`apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
defaultMode: audit
owners:
- name: app
  match: {validating: [` + strings.Join(names, ", ") + `]}
  writers: {serviceAccounts: [app/controller]}
  ca:
    pem: |
` + testpki.Indent(string(ca), 6) + "\n"))
	require.NoError(t, err)
	return cfg
}

type staticConfig struct{ cfg *policy.Mappings }

func (s staticConfig) Current() *policy.Mappings { return s.cfg }

func Test_trim(t *testing.T) {
	at := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	in := vwc("7", []byte("bundle"), "replica-0", at)
	in.Webhooks[0].Rules = []admv1.RuleWithOperations{{Operations: []admv1.OperationType{admv1.Create}}}
	fail, timeout := admv1.Fail, int32(5)
	in.Webhooks[0].FailurePolicy, in.Webhooks[0].TimeoutSeconds = &fail, &timeout
	out, err := trim(in)
	require.NoError(t, err)
	assert.Equal(t, &admv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", ResourceVersion: "7", Annotations: map[string]string{"team": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{in.ManagedFields[1]}},
		Webhooks: []admv1.ValidatingWebhook{{Name: "w.example.io", ClientConfig: admv1.WebhookClientConfig{CABundle: []byte("bundle")},
			FailurePolicy: &fail, TimeoutSeconds: &timeout}},
	}, out, "the cache keeps only what the decision and the health series read")
}
