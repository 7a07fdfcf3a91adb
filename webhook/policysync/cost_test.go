package policysync

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// webhookConfiguration is the validating configuration app-webhooks with n
// entries holding the owner's CA, every other one twice (different
// bundles, whose merge the policy checks entry by entry).
func webhookConfiguration(n int) *admv1.ValidatingWebhookConfiguration {
	c := &admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "app-webhooks"}}
	for i := range n {
		c.Webhooks = append(c.Webhooks, admv1.ValidatingWebhook{Name: fmt.Sprintf("w%d.app.io", i),
			ClientConfig: admv1.WebhookClientConfig{URL: new(fmt.Sprintf("https://app.example/%d", i)), CABundle: bytes.Repeat(caPEM, 1+i%2)}})
	}
	return c
}

// costlyEntries is a configuration size whose owner's merge is over
// kube-apiserver's CEL cost limit: far more entries than any product
// writes (the check's cost grows with the bytes of caBundle text).
const costlyEntries = 1300

// Test_SyncerCost: a configuration whose owner's worst write is over the
// margin of kube-apiserver's CEL cost limit is reported (gauge, one error
// log naming the mapping, configuration, entries, cost and limit, one
// Warning Event when it starts, one Normal when it ends), and its
// mapping's policies still fail closed: a write kube-apiserver cannot
// decide within its limit is refused, never admitted unchecked; the
// series goes with the configuration.
func Test_SyncerCost(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, testConfig)
	var mu sync.Mutex
	var logs []string
	e.syncer.Log = funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, args)
	}, funcr.Options{})
	overLogs := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, l := range logs {
			if strings.Contains(l, "over the guard's margin") {
				out = append(out, l)
			}
		}
		return out
	}
	failurePolicy := func(name string) admv1.FailurePolicyType {
		var p admv1.ValidatingAdmissionPolicy
		require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: name}, &p))
		return *p.Spec.FailurePolicy
	}
	ratio := func() float64 {
		return testutil.ToFloat64(e.metrics.WorstWriteCost.WithLabelValues("app", "ValidatingWebhookConfiguration/app-webhooks"))
	}

	ev := &events{}
	e.syncer.Events = ev

	big := webhookConfiguration(costlyEntries)
	require.NoError(t, e.client.Create(ctx, big))
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Greater(t, ratio(), 1.0, "kube-apiserver would refuse the merge")
	require.Len(t, ev.got, 1)
	assert.Contains(t, ev.got[0], `Warning PolicyCostNearLimit webhook-guard-app: a worst-case owner write to a configuration of mapping "app" is at or over 80% of kube-apiserver's CEL cost limit`)
	assert.Contains(t, ev.got[0], "its policies still fail closed")
	assert.Equal(t, admv1.Fail, failurePolicy("webhook-guard-app"), "a write too costly to decide is refused, never admitted unchecked")
	assert.Equal(t, admv1.Fail, failurePolicy("webhook-guard-other"), "other mappings are untouched")
	require.Len(t, overLogs(), 1)
	assert.Contains(t, overLogs()[0], `owners[app]: ValidatingWebhookConfiguration app-webhooks has 1300 entries: kube-apiserver would refuse the owner's merge for its CEL cost`)
	assert.Contains(t, overLogs()[0], `"limit"=1000000`)

	writes := e.total()
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Equal(t, writes, e.total(), "an unchanged configuration costs no write")
	assert.Len(t, overLogs(), 1, "nor a check or a log: the result is cached")
	assert.Len(t, ev.got, 1, "nor an Event")

	require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "app-webhooks"}, big))
	big.Webhooks = webhookConfiguration(5).Webhooks
	require.NoError(t, e.client.Update(ctx, big))
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Less(t, ratio(), 0.1)
	assert.Equal(t, admv1.Fail, failurePolicy("webhook-guard-app"))
	require.Len(t, ev.got, 2)
	assert.Contains(t, ev.got[1], `Normal PolicyCostWithinLimit webhook-guard-app: every configuration of mapping "app" is under 80%`)

	require.NoError(t, e.client.Delete(ctx, big))
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Equal(t, 0, testutil.CollectAndCount(e.metrics.WorstWriteCost), "no series for a configuration that is gone")
}

// Test_lastResult: an object the pass has no room to check again keeps
// its last result, whatever resourceVersion it was checked at, so that a
// mapping over the margin is not written with Fail for a pass.
func Test_lastResult(t *testing.T) {
	old := costKey{mapping: "app", object: "ValidatingWebhookConfiguration/a", resourceVersion: "7", policies: "p"}
	prev := map[costKey]costOf{old: {mapping: "app", object: old.object}}
	k, _, ok := lastResult(prev, costKey{mapping: "app", object: old.object, resourceVersion: "8", policies: "p"})
	assert.True(t, ok)
	assert.Equal(t, old, k)
	_, _, ok = lastResult(prev, costKey{mapping: "other", object: old.object, resourceVersion: "8"})
	assert.False(t, ok, "another mapping's result is not this one's")
}

// labelledConfig maps the configurations labelled app=selected to one
// owner, by selector alone.
const labelledConfig = `apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
breakGlass: {groups: [system:masters]}
owners:
  - name: app
    mode: enforce
    match: {labelSelector: {matchLabels: {app: selected}}}
    writers: {serviceAccounts: [app/controller]}
    ca: {secret: {namespace: app, name: app-ca}}
`

// Test_SyncerCost_labelSelected: a mapping that selects its
// configurations by label has them checked too, each once, and a
// configuration it no longer selects loses its series.
func Test_SyncerCost_labelSelected(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t, labelledConfig)
	ratio := func(object string) float64 {
		return testutil.ToFloat64(e.metrics.WorstWriteCost.WithLabelValues("app", object))
	}
	big := webhookConfiguration(costlyEntries)
	big.Labels = map[string]string{"app": "selected"}
	require.NoError(t, e.client.Create(ctx, big))
	small := &admv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "small-webhooks", Labels: map[string]string{"app": "selected"}},
		Webhooks: []admv1.MutatingWebhook{{Name: "m.app.io", ClientConfig: admv1.WebhookClientConfig{URL: new("https://app.example/m"), CABundle: caPEM}}}}
	require.NoError(t, e.client.Create(ctx, small))
	unselected := webhookConfiguration(250)
	unselected.Name = "unselected-webhooks"
	require.NoError(t, e.client.Create(ctx, unselected))

	require.NoError(t, e.syncer.Sync(ctx))
	assert.Greater(t, ratio("ValidatingWebhookConfiguration/app-webhooks"), 1.0, "kube-apiserver would refuse the merge")
	assert.Less(t, ratio("MutatingWebhookConfiguration/small-webhooks"), 0.1)
	assert.Equal(t, 2, testutil.CollectAndCount(e.metrics.WorstWriteCost), "an unselected configuration is not the mapping's")
	var p admv1.ValidatingAdmissionPolicy
	require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &p))
	assert.Equal(t, admv1.Fail, *p.Spec.FailurePolicy)

	require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "app-webhooks"}, big))
	big.Labels = nil
	require.NoError(t, e.client.Update(ctx, big))
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Equal(t, 1, testutil.CollectAndCount(e.metrics.WorstWriteCost), "no series for a configuration no longer selected")
	require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &p))
	assert.Equal(t, admv1.Fail, *p.Spec.FailurePolicy)
}
