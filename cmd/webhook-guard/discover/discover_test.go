package discover

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/webhook-guard/webhook-guard/cmd/webhook-guard/internal/discover"
	"github.com/webhook-guard/webhook-guard/hack/testpki"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/webhook"
)

// Test_Options_Run checks that both output formats carry the evidence as
// comments and load as they are: the GuardConfig file through policy.Load,
// the Helm values' config through policy.Load with apiVersion and kind
// added (the chart's schema is checked by e2e with helm).
func Test_Options_Run(t *testing.T) {
	ca, err := testpki.NewCA("app-ca")
	require.NoError(t, err)
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	objects := []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app-webhook"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "ctrl"}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "ctrl"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ctrl"}},
			Spec: corev1.PodSpec{ServiceAccountName: "ctrl", Volumes: []corev1.Volume{{Name: "certs",
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "webhook-certs"}}}}},
		}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "webhook-certs"}, Data: map[string][]byte{"ca.crt": ca.PEM, "tls.key": ca.KeyPEM}},
		&admv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "app-validating"}, Webhooks: []admv1.ValidatingWebhook{{
			Name: "w.app.io", SideEffects: ptr.To(admv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admv1.WebhookClientConfig{CABundle: ca.PEM, Service: &admv1.ServiceReference{Namespace: "app", Name: "app-webhook"}},
		}}},
		&admv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "by-url"}, Webhooks: []admv1.MutatingWebhook{{
			Name: "w.url.io", SideEffects: ptr.To(admv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admv1.WebhookClientConfig{URL: new("https://10.0.0.1/m")},
		}}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).Build()
	wantOwner := guardapi.Owner{Name: "ctrl", Match: guardapi.Match{Validating: []string{"app-validating"}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{"app/ctrl"}},
		CA:      guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "app", Name: "webhook-certs", Key: "ca.crt"}}}
	undecided := `
# Undecided: left unmapped (unmanaged), for you to map by hand.
# - MutatingWebhookConfiguration/by-url:
#     undecided: webhooks[0] calls clientConfig.url https://10.0.0.1/m, not a Service: no workload, so no service account to name as the writer
#     undecided: every caBundle is empty and no cert-manager.io/inject-ca-from annotation names a CA: there is no CA to match
#     found: webhooks[0] calls clientConfig.url https://10.0.0.1/m
`
	header := "# Owner mappings proposed by `webhook-guard discover` from the live cluster, in audit mode.\n" +
		"# Review each mapping's evidence, run the guard in audit mode, then read `webhook-guard review`\n" +
		"# before switching a mapping to enforce.\n"
	owners := `  # Evidence:
  #   ValidatingWebhookConfiguration/app-validating: webhooks[0] calls Service app/app-webhook, which selects Deployment app/ctrl (service account ctrl)
  #   ValidatingWebhookConfiguration/app-validating: Secret app/webhook-certs key ca.crt holds the caBundle's CA FP and is mounted by the workload
  - name: ctrl
    match:
      validating:
        - app-validating
    writers:
      serviceAccounts:
        - app/ctrl
    ca:
      secret:
        namespace: app
        name: webhook-certs
        key: ca.crt
`
	fp := sha256.Sum256(ca.Cert.Raw)
	propose := func(t *testing.T, format string) string {
		var out bytes.Buffer
		o := Options{Format: format, Client: c}
		require.NoError(t, o.Validate())
		require.NoError(t, o.Complete(nil))
		o.Out = &out
		require.NoError(t, o.Run(t.Context()))
		return strings.ReplaceAll(out.String(), hex.EncodeToString(fp[:])[:16], "FP")
	}

	t.Run("if asked for a GuardConfig, print one that loads, with the evidence and the undecided as comments", func(t *testing.T) {
		out := propose(t, string(discover.FormatConfig))
		assert.Equal(t, header+"apiVersion: webhook-guard.io/v1alpha1\nkind: GuardConfig\ndefaultMode: audit\nbreakGlass:\n  groups:\n    - system:masters\nunmanaged: allow\nowners:\n"+owners+undecided, out)
		cfg, err := policy.Load([]byte(out))
		require.NoError(t, err)
		assert.Equal(t, []guardapi.Owner{wantOwner}, cfg.Spec.Owners)
	})

	t.Run("if asked for Helm values, print config.owners that load as a GuardConfig", func(t *testing.T) {
		out := propose(t, string(discover.FormatValues))
		assert.Equal(t, header+"# Helm values: helm upgrade --install ... -f this-file.yaml (lists replace the chart's defaults).\nconfig:\n  defaultMode: audit\n  owners:\n"+indentLines(owners)+undecided, out)
		var values struct {
			Config map[string]any `json:"config"`
		}
		require.NoError(t, yaml.UnmarshalStrict([]byte(out), &values))
		values.Config["apiVersion"], values.Config["kind"] = guardapi.APIVersion, guardapi.Kind
		b, err := yaml.Marshal(values.Config)
		require.NoError(t, err)
		cfg, err := policy.Load(b)
		require.NoError(t, err)
		assert.Equal(t, []guardapi.Owner{wantOwner}, cfg.Spec.Owners)
	})
}

func indentLines(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "")
}
