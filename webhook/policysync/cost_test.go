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

// Test_SyncerCost: a configuration whose owner's worst write is over the
// margin of kube-apiserver's CEL cost limit is reported (gauge, one error
// log naming the mapping, configuration, entries, cost and limit) and its
// mapping's policies are written with failurePolicy Ignore, so that
// kube-apiserver admits the rotation it could not finish deciding; under
// the margin they fail again; the series goes with the configuration.
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

	big := webhookConfiguration(250)
	require.NoError(t, e.client.Create(ctx, big))
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Greater(t, ratio(), 1.0, "kube-apiserver would refuse the merge")
	assert.Equal(t, admv1.Ignore, failurePolicy("webhook-guard-app"))
	assert.Equal(t, admv1.Fail, failurePolicy("webhook-guard-other"), "other mappings are untouched")
	require.Len(t, overLogs(), 1)
	assert.Contains(t, overLogs()[0], `owners[app]: ValidatingWebhookConfiguration app-webhooks has 250 entries: kube-apiserver would refuse the owner's merge for its CEL cost`)
	assert.Contains(t, overLogs()[0], `"limit"=1000000`)

	writes := e.total()
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Equal(t, writes, e.total(), "an unchanged configuration costs no write")
	assert.Len(t, overLogs(), 1, "nor a check or a log: the result is cached")

	require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "app-webhooks"}, big))
	big.Webhooks = webhookConfiguration(5).Webhooks
	require.NoError(t, e.client.Update(ctx, big))
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Less(t, ratio(), 0.1)
	assert.Equal(t, admv1.Fail, failurePolicy("webhook-guard-app"), "under the margin the policy fails its writes again")

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
