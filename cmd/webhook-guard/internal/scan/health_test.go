package scan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/discover"
	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
)

func Test_Health(t *testing.T) {
	now := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	ca, err := testpki.NewCA("app-ca", testpki.WithValidity(now.Add(-time.Hour), now.Add(365*24*time.Hour)))
	require.NoError(t, err)
	leaf, err := ca.Issue("app-webhook", "app-webhook.app.svc")
	require.NoError(t, err)
	soonCA, err := testpki.NewCA("soon-ca", testpki.WithValidity(now.Add(-time.Hour), now.Add(5*24*time.Hour)))
	require.NoError(t, err)
	soonLeaf, err := soonCA.Issue("app-webhook", "app-webhook.app.svc")
	require.NoError(t, err)
	foreign, err := testpki.NewCA("foreign-ca")
	require.NoError(t, err)

	excludeSystem := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "kube-node-lease", "app"}}}}
	podRules := []admv1.RuleWithOperations{{Operations: []admv1.OperationType{admv1.Create},
		Rule: admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	// healthy is a webhook with nothing to report; each case breaks one thing.
	healthy := func() discover.Webhook {
		return discover.Webhook{Name: "w.app.io", Service: &discover.ServiceRef{Namespace: "app", Name: "app-webhook"}, CABundle: ca.PEM,
			FailurePolicy: ptr.To(admv1.Fail), SideEffects: ptr.To(admv1.SideEffectClassNone), TimeoutSeconds: ptr.To[int32](5),
			NamespaceSelector: excludeSystem, Rules: podRules}
	}
	cluster := func(ready int, servingPEM []byte) discover.Cluster {
		return discover.Cluster{
			Services: map[string]discover.Service{"app/app-webhook": {Namespace: "app", Name: "app-webhook", Selector: map[string]string{"app": "webhook"}, ReadyEndpoints: ready}},
			Workloads: []discover.Workload{{Kind: "Deployment", Namespace: "app", Name: "app", ServiceAccount: "app",
				TemplateLabels: map[string]string{"app": "webhook"}, Secrets: []string{"serving"}}},
			Sources: []discover.Source{{Kind: discover.SourceSecret, Namespace: "app", Name: "serving", Key: "tls.crt", PEM: servingPEM}},
		}
	}
	const ref = "ValidatingWebhookConfiguration/app"
	tests := map[string]struct {
		webhook  func(w *discover.Webhook)
		managers []string
		cluster  discover.Cluster
		want     []Finding
	}{
		"if the webhook is healthy, report nothing": {
			cluster: cluster(2, leaf.CertPEM),
		},
		"if failurePolicy Fail calls a Service with no ready endpoints, fail on clientConfig.service": {
			cluster: cluster(0, leaf.CertPEM),
			want: []Finding{{Level: LevelFail, Check: CheckNoEndpoints, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].clientConfig.service",
				Detail:     "Service app/app-webhook has no ready endpoints and failurePolicy is Fail: every request the webhook matches fails",
				Suggestion: "run the webhook's pods behind Service app/app-webhook, or set failurePolicy: Ignore until they are ready"}},
		},
		"if failurePolicy is Ignore, a Service with no ready endpoints is not reported": {
			webhook: func(w *discover.Webhook) { w.FailurePolicy = ptr.To(admv1.Ignore) },
			cluster: cluster(0, leaf.CertPEM),
		},
		"if the Service does not exist, fail on clientConfig.service": {
			cluster: discover.Cluster{},
			want: []Finding{{Level: LevelFail, Check: CheckNoEndpoints, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].clientConfig.service",
				Detail:     "Service app/app-webhook does not exist and failurePolicy is Fail: every request the webhook matches fails",
				Suggestion: "run the webhook's pods behind Service app/app-webhook, or set failurePolicy: Ignore until they are ready"}},
		},
		"if the mounted serving certificate is signed by another CA than the caBundle's, fail on caBundle": {
			webhook: func(w *discover.Webhook) { w.CABundle = foreign.PEM },
			cluster: cluster(1, leaf.CertPEM),
			want: []Finding{{Level: LevelFail, Check: CheckServingCert, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].clientConfig.caBundle",
				Detail:     "the serving certificate in Secret app/serving key tls.crt does not verify against the caBundle: x509: certificate signed by unknown authority",
				Suggestion: "make the caBundle hold the CA that signs the serving certificate (kube-apiserver's calls fail TLS until then)"}},
		},
		"if the caBundle is empty, the mounted serving certificate is verified against the system roots, which hold no private CA: fail on caBundle": {
			webhook: func(w *discover.Webhook) { w.CABundle = nil },
			cluster: cluster(1, leaf.CertPEM),
			want: []Finding{{Level: LevelFail, Check: CheckServingCert, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].clientConfig.caBundle",
				Detail:     "the serving certificate in Secret app/serving key tls.crt does not verify against the system roots (the caBundle is empty): x509: certificate signed by unknown authority",
				Suggestion: "make the caBundle hold the CA that signs the serving certificate (kube-apiserver's calls fail TLS until then)"}},
		},
		"if the caBundle holds no certificate, fail on caBundle: kube-apiserver cannot call the webhook": {
			webhook: func(w *discover.Webhook) { w.CABundle = []byte("garbage") },
			cluster: cluster(1, leaf.CertPEM),
			want: []Finding{{Level: LevelFail, Check: CheckServingCert, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].clientConfig.caBundle",
				Detail:     "the serving certificate in Secret app/serving key tls.crt cannot be verified: the caBundle (7 bytes) holds no PEM certificate, so kube-apiserver cannot build its client and every call fails",
				Suggestion: "set the caBundle to the PEM of the CA that signs the serving certificate, or empty it to trust the system roots"}},
		},
		"if the mounted serving certificate expires within the threshold, warn on caBundle": {
			webhook: func(w *discover.Webhook) { w.CABundle = soonCA.PEM },
			cluster: cluster(1, soonLeaf.CertPEM),
			want: []Finding{{Level: LevelWarn, Check: CheckServingCert, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].clientConfig.caBundle",
				Detail:     "the serving certificate in Secret app/serving key tls.crt expires at 2026-12-06T05:00:00Z, in 5d (under the 30d threshold)",
				Suggestion: "renew the serving certificate in Secret app/serving"}},
		},
		"if failurePolicy Fail rules have no namespaceSelector, warn naming kube-system, kube-node-lease and the webhook's own namespace": {
			webhook: func(w *discover.Webhook) { w.NamespaceSelector = nil },
			cluster: cluster(1, leaf.CertPEM),
			want: []Finding{{Level: LevelWarn, Check: CheckFailScope, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].namespaceSelector",
				Detail:     "failurePolicy is Fail and the namespaceSelector does not exclude kube-system, kube-node-lease, app: while the webhook is down, writes there fail",
				Suggestion: "add {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kube-node-lease, app]} to the namespaceSelector's matchExpressions, or set failurePolicy: Ignore"}},
		},
		"if the rules catch only cluster-scoped resources, the namespaceSelector does not matter": {
			webhook: func(w *discover.Webhook) {
				w.NamespaceSelector = nil
				w.Rules = []admv1.RuleWithOperations{{Rule: admv1.Rule{Resources: []string{"nodes"}, Scope: ptr.To(admv1.ClusterScope)}}}
			},
			cluster: cluster(1, leaf.CertPEM),
		},
		"if timeoutSeconds is above 10, warn on timeoutSeconds": {
			webhook: func(w *discover.Webhook) { w.TimeoutSeconds = ptr.To[int32](30) },
			cluster: cluster(1, leaf.CertPEM),
			want: []Finding{{Level: LevelWarn, Check: CheckTimeout, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].timeoutSeconds",
				Detail:     "timeoutSeconds is 30: every request the webhook matches waits up to 30s while it hangs",
				Suggestion: "set webhooks[0].timeoutSeconds to 10 or less"}},
		},
		"if sideEffects is Unknown, warn on sideEffects": {
			webhook: func(w *discover.Webhook) { w.SideEffects = ptr.To(admv1.SideEffectClassUnknown) },
			cluster: cluster(1, leaf.CertPEM),
			want: []Finding{{Level: LevelWarn, Check: CheckSideEffects, Configuration: ref, Webhook: "w.app.io", Field: "webhooks[0].sideEffects",
				Detail:     "sideEffects is Unknown: kube-apiserver rejects every dry-run request (kubectl --dry-run=server, diff) this webhook matches",
				Suggestion: "set webhooks[0].sideEffects to None, or NoneOnDryRun if the webhook skips its side effects on dry-run requests"}},
		},
		"if two field managers own caBundle, warn on caBundle": {
			managers: []string{"app", "rogue"},
			cluster:  cluster(1, leaf.CertPEM),
			want: []Finding{{Level: LevelWarn, Check: CheckCAWriters, Configuration: ref, Field: "webhooks[].clientConfig.caBundle",
				Detail:     "2 field managers own caBundle fields: app, rogue",
				Suggestion: "keep one CA writer: every other manager is a second CA writer fighting the owner (map the owner and run the guard to see who writes)"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := healthy()
			if tc.webhook != nil {
				tc.webhook(&w)
			}
			cfg := discover.Configuration{Kind: policy.KindValidating, Name: "app", CABundleManagers: tc.managers, Webhooks: []discover.Webhook{w}}
			got := Health([]discover.Configuration{cfg}, tc.cluster, Options{Now: now, ExpiryThreshold: 30 * 24 * time.Hour})
			assert.Equal(t, tc.want, got)
		})
	}
}
