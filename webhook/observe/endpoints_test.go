package observe

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/webhook-guard/webhook-guard/hack/testpki"
)

// slice is an EndpointSlice of Service namespace/service whose endpoints
// have the given ready conditions (nil: unset).
func slice(namespace, name, service string, ready ...*bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: service, "other": "label"}}}
	for _, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: r}})
	}
	return s
}

func Test_healthSource_readyEndpoints(t *testing.T) {
	yes, no := true, false
	svc := func(namespace, name string) *admv1.ServiceReference {
		return &admv1.ServiceReference{Namespace: namespace, Name: name}
	}
	url := "https://webhook.example.io"
	const series = `webhook_guard_webhook_service_ready_endpoints{configuration="guarded",kind="ValidatingWebhookConfiguration",service_name="svc",service_namespace="app",webhook="a.example.io"} `
	for name, tc := range map[string]struct {
		client   admv1.WebhookClientConfig
		slices   []*discoveryv1.EndpointSlice
		unsynced bool
		want     []string
	}{
		"if the Service has no slice, its entry reports 0": {
			client: admv1.WebhookClientConfig{Service: svc("app", "svc")},
			want:   []string{series + "0"},
		},
		"if an endpoint's ready condition is true or unset, it counts; false does not": {
			client: admv1.WebhookClientConfig{Service: svc("app", "svc")},
			slices: []*discoveryv1.EndpointSlice{slice("app", "svc-1", "svc", &yes, nil, &no)},
			want:   []string{series + "2"},
		},
		"if the Service has several slices, their ready endpoints add up": {
			client: admv1.WebhookClientConfig{Service: svc("app", "svc")},
			slices: []*discoveryv1.EndpointSlice{slice("app", "svc-1", "svc", &yes), slice("app", "svc-2", "svc", nil, &yes, &no)},
			want:   []string{series + "3"},
		},
		"if every endpoint is not ready, it reports 0": {
			client: admv1.WebhookClientConfig{Service: svc("app", "svc")},
			slices: []*discoveryv1.EndpointSlice{slice("app", "svc-1", "svc", &no, &no)},
			want:   []string{series + "0"},
		},
		"if slices belong to another Service or a same-named Service of another namespace, they do not count": {
			client: admv1.WebhookClientConfig{Service: svc("app", "svc")},
			slices: []*discoveryv1.EndpointSlice{slice("other", "svc-1", "svc", &yes), slice("app", "svc2-1", "svc2", &yes), slice("app", "orphan", "", &yes)},
			want:   []string{series + "0"},
		},
		"if the entry is called by URL, it has no series": {
			client: admv1.WebhookClientConfig{URL: &url},
			slices: []*discoveryv1.EndpointSlice{slice("app", "svc-1", "svc", &yes)},
		},
		"if the watch of EndpointSlices has not synced, there is no series": {
			client:   admv1.WebhookClientConfig{Service: svc("app", "svc")},
			slices:   []*discoveryv1.EndpointSlice{slice("app", "svc-1", "svc", &yes)},
			unsynced: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			vwcs := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
			w, err := trim(&admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "guarded"},
				Webhooks: []admv1.ValidatingWebhook{{Name: "a.example.io", ClientConfig: tc.client}}})
			require.NoError(t, err)
			require.NoError(t, vwcs.Add(w))
			slices := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{byService: serviceIndex})
			for _, s := range tc.slices {
				trimmed, err := trim(s)
				require.NoError(t, err)
				require.IsType(t, &readySlice{}, trimmed, "the cache keeps a count, not the slice")
				require.NoError(t, slices.Add(trimmed))
			}
			endpoints := readyEndpoints{slices: slices, synced: func() bool { return !tc.unsynced }}
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg)
			m.Health.SetSource(healthSource(staticConfig{appConfig(t, testpki.MustCA(t, "owner-ca").PEM, "")}, endpoints.count, vwcs))
			var got []string
			for _, s := range healthSeries(t, reg) {
				if strings.HasPrefix(s, "webhook_guard_webhook_service_") {
					got = append(got, s)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func Test_trimSlice(t *testing.T) {
	yes := true
	s := slice("app", "svc-1", "svc", &yes, nil)
	s.ResourceVersion, s.UID = "7", "uid-1"
	assert.Equal(t, &readySlice{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "svc-1", UID: "uid-1", ResourceVersion: "7"}, Service: "svc", Ready: 2}, trimSlice(s),
		"name, Service and count kept; addresses and other labels dropped")
	copied := trimSlice(s).DeepCopyObject()
	assert.Equal(t, trimSlice(s), copied)
}

func Test_Observer_readyEndpoints(t *testing.T) {
	yes, no := true, false
	client := fake.NewClientset(
		&admv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "served"},
			Webhooks: []admv1.MutatingWebhook{{Name: "m.example.io", ClientConfig: admv1.WebhookClientConfig{Service: &admv1.ServiceReference{Namespace: "app", Name: "svc"}}}}},
		slice("app", "svc-1", "svc", &yes, &no))
	reg := startObserver(t, client)
	const series = `webhook_guard_webhook_service_ready_endpoints{configuration="served",kind="MutatingWebhookConfiguration",service_name="svc",service_namespace="app",webhook="m.example.io"} `
	readySeries := func(c *assert.CollectT, want string) {
		assert.Contains(c, healthSeries(t, reg), series+want)
	}
	assert.EventuallyWithT(t, func(c *assert.CollectT) { readySeries(c, "1") }, 10*time.Second, 10*time.Millisecond,
		"the leader counts the ready endpoints of the Service an entry calls")
	_, err := client.DiscoveryV1().EndpointSlices("app").Update(t.Context(), slice("app", "svc-1", "svc", &no, &no), metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.EventuallyWithT(t, func(c *assert.CollectT) { readySeries(c, "0") }, 10*time.Second, 10*time.Millisecond,
		"a Service whose endpoints are all not ready reports 0")
}
