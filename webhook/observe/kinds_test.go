package observe

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_Observer_health_everyKind walks guardapi.Kinds: with one object of
// each kind in the cluster (its row's example), mapped, the leader
// exports the health series of its entry. The webhook configurations
// arrive through the typed clientset, the kinds whose objects hold one
// entry through the dynamic client. A kind the observer does not watch
// (or whose entry trimTrust cannot find) fails here: its caBundle's
// expiry would never be exported.
func Test_Observer_health_everyKind(t *testing.T) {
	ca := testpki.MustCA(t, "owner-ca")
	var typed, dynamic []runtime.Object
	for _, k := range guardapi.Kinds {
		u := &unstructured.Unstructured{Object: k.Example(ca.PEM)}
		if k.Entries.One() {
			dynamic = append(dynamic, u)
			continue
		}
		obj, err := scheme.Scheme.New(u.GroupVersionKind())
		require.NoError(t, err, "the clientset has no type for %s", k.Kind)
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj))
		typed = append(typed, obj)
	}
	doc, err := json.Marshal(map[string]any{"apiVersion": guardapi.APIVersion, "kind": guardapi.Kind, "owners": []guardapi.Owner{
		{Name: "app", Match: guardapi.ExampleMatch(), Writers: guardapi.Subjects{ServiceAccounts: []string{"app/controller"}}, CA: guardapi.CASource{PEM: string(ca.PEM)}}}})
	require.NoError(t, err)
	cfg, err := policy.Load(doc)
	require.NoError(t, err)

	reg := startObserver(t, fake.NewClientset(typed...), func(o *Observer) {
		o.Config = staticConfig{cfg}
		o.Dynamic = trustClient(dynamic...)
	})
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		series := healthSeries(t, reg)
		for _, k := range guardapi.Kinds {
			assert.True(c, slices.ContainsFunc(series, func(s string) bool {
				return strings.HasPrefix(s, "webhook_guard_webhook_info{") && strings.Contains(s, `configuration="`+k.ExampleName()+`"`) &&
					strings.Contains(s, `kind="`+k.Kind+`",mapping="app"`)
			}), "no webhook_guard_webhook_info series of the %s", k.Kind)
		}
	}, 10*time.Second, 10*time.Millisecond)
}
