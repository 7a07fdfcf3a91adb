package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// The trust tests' injectedByCertManager mapping: its configuration names
// the Secret cainjector copies the CA from (inject-ca-from-secret), so no
// cert-manager CRD is needed. The mapping pins that Secret: an entry may
// wait empty for cainjector only while the CA it will bring can be read,
// and the policy shape knows an unpinned mapping's CA only from the
// configurations it already saw, none before the first is created.
const (
	trustMapping = "trust-injected"
	trustName    = "trust-injected-webhooks"
	trustSecret  = "trust-serving-cert"
)

// trustConfig is guardConfig plus the injected mapping, with cainjector's
// service account as its writer (besides the owner).
func trustConfig() *guardapi.GuardConfig {
	pin := &guardapi.InjectedByCertManager{Secret: &guardapi.ObjectRef{Namespace: appNamespace, Name: trustSecret}}
	cfg := guardConfig(mapping(trustMapping, guardapi.ModeEnforce, trustName, guardapi.CASource{InjectedByCertManager: pin}))
	cfg.CertManager.CAInjectorServiceAccount = "cert-manager/cert-manager-cainjector"
	return cfg
}

// TestTrustEmptyCABundleStaticShape: an entry without a caBundle makes
// kube-apiserver trust its system roots, so the static webhook denies a
// writer's new entry without one, unless cainjector's fill is coming, and
// a renamed entry left without one; it admits the writer's removal of an
// entry (which takes its trust away, as Kyverno does when the last policy
// that uses a webhook goes) and a rename that keeps the owner's CA.
func TestTrustEmptyCABundleStaticShape(t *testing.T) {
	f := newFixture(t, framework.Options{Config: trustConfig()})
	runTrustScenario(t, f, true, func(t testing.TB, err error, _ string, want ...string) {
		t.Helper()
		requireDenied(t, err, want...)
	})
}

// TestTrustEmptyCABundlePolicyShape: the same requests, decided the same
// way by the generated ValidatingAdmissionPolicies.
func TestTrustEmptyCABundlePolicyShape(t *testing.T) {
	opts := policyOptions()
	opts.Config = trustConfig()
	f := newFixture(t, opts)
	waitPolicyActive(t, f)
	waitMappingEnforced(t, f, trustMapping, trustName)
	// The policy's message does not name the entries (docs/policy-shape.md
	// says why).
	runTrustScenario(t, f, false, func(t testing.TB, err error, mapping string, want ...string) {
		t.Helper()
		requirePolicyDenied(t, err, vap.PolicyName(mapping), want...)
	})
}

// denyFunc asserts a 403 from the shape under test, for mapping, whose
// message holds every want.
type denyFunc func(t testing.TB, err error, mapping string, want ...string)

// runTrustScenario runs the requests against the shape under test;
// namesEntries says its denials name the entries they are about.
func runTrustScenario(t *testing.T, f *fixture, namesEntries bool, denied denyFunc) {
	ctx := t.Context()
	cainjector := f.env.ServiceAccount(t, "cert-manager", "cert-manager-cainjector")
	systemRoots := "kube-apiserver would trust its system roots"

	t.Run("the owner adds a URL entry with no caBundle: denied", func(t *testing.T) {
		if _, err := f.admin.Get(ctx, framework.Validating, enforcedName); err != nil {
			f.create(t, framework.Validating, enforcedName, f.ownerCA.PEM)
		}
		before := f.admin.MustGet(t, framework.Validating, enforcedName)
		_, err := updateValidating(ctx, f.owner, enforcedName, func(o *admv1.ValidatingWebhookConfiguration) {
			extra := *o.Webhooks[0].DeepCopy()
			extra.Name = "public.e2e.webhook-guard.io"
			extra.ClientConfig = admv1.WebhookClientConfig{URL: new("https://webhook.example.com/validate")}
			o.Webhooks = append(o.Webhooks, extra)
		})
		want := []string{"ca-mismatch", "no caBundle", systemRoots}
		if namesEntries {
			want = append(want, `webhook "public.e2e.webhook-guard.io"`)
		}
		denied(t, err, enforcedMapping, want...)
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)
	})

	t.Run("the owner renames an entry and leaves the new name without a caBundle: denied", func(t *testing.T) {
		before := f.admin.MustGet(t, framework.Validating, enforcedName)
		_, err := updateValidating(ctx, f.owner, enforcedName, func(o *admv1.ValidatingWebhookConfiguration) {
			o.Webhooks[0].Name = "renamed.e2e.webhook-guard.io"
			o.Webhooks[0].ClientConfig.CABundle = nil
		})
		want := []string{"ca-mismatch", "no caBundle", systemRoots}
		if namesEntries {
			want = append(want, `webhook "renamed.e2e.webhook-guard.io"`)
		}
		denied(t, err, enforcedMapping, want...)
		requireUnchanged(t, f.admin, framework.Validating, enforcedName, before.ResourceVersion, f.ownerCA.PEM)
	})

	t.Run("the owner adds an entry with its CA, then removes it, then renames the first keeping its CA: admitted", func(t *testing.T) {
		_, err := updateValidating(ctx, f.owner, enforcedName, func(o *admv1.ValidatingWebhookConfiguration) {
			extra := *o.Webhooks[0].DeepCopy()
			extra.Name = "second.e2e.webhook-guard.io"
			o.Webhooks = append(o.Webhooks, extra)
		})
		if err != nil {
			t.Fatalf("the owner's new entry with its CA: %v", err)
		}
		// Removing an entry takes its trust away: kube-apiserver stops
		// calling it. A writer does it in normal operation.
		got, err := updateValidating(ctx, f.owner, enforcedName, func(o *admv1.ValidatingWebhookConfiguration) {
			o.Webhooks = o.Webhooks[:1]
		})
		if err != nil {
			t.Fatalf("the owner's removal of an entry was refused: %v", err)
		}
		if len(got.Webhooks) != 1 {
			t.Fatalf("stored %d entries after the removal, want 1", len(got.Webhooks))
		}
		got, err = updateValidating(ctx, f.owner, enforcedName, func(o *admv1.ValidatingWebhookConfiguration) {
			o.Webhooks[0].Name = "renamed.e2e.webhook-guard.io"
		})
		if err != nil {
			t.Fatalf("the owner's rename keeping its CA was refused: %v", err)
		}
		if got.Webhooks[0].Name != "renamed.e2e.webhook-guard.io" || !bytes.Equal(got.Webhooks[0].ClientConfig.CABundle, f.ownerCA.PEM) {
			t.Fatalf("stored entry %q with caBundle %d bytes, want the renamed entry with the owner's CA", got.Webhooks[0].Name, len(got.Webhooks[0].ClientConfig.CABundle))
		}
	})

	t.Run("the owner creates a configuration with no caBundle under a mapping whose CA is not injected: denied", func(t *testing.T) {
		if err := f.admin.Delete(ctx, framework.Validating, enforcedName, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", enforcedName, err)
		}
		_, err := f.owner.Create(ctx, framework.Spec{Kind: framework.Validating, Name: enforcedName,
			Annotations: map[string]string{"cert-manager.io/inject-ca-from-secret": appNamespace + "/" + trustSecret}}, metav1.CreateOptions{})
		denied(t, err, enforcedMapping, "ca-mismatch", "no caBundle", systemRoots)
	})

	// What cert-manager would have issued: a Secret whose ca.crt is the CA
	// cainjector copies into the configuration.
	issuerCA := framework.NewCA(t, "trust-issuer-ca")
	_, err := f.env.AdminKube.CoreV1().Secrets(appNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: trustSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       framework.SecretData(issuerCA, issuerCA.Issue(t, "trust.app-system.svc", "trust.app-system.svc")),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the serving Secret: %v", err)
	}
	inject := map[string]string{"cert-manager.io/inject-ca-from-secret": appNamespace + "/" + trustSecret}

	t.Run("the owner creates a configuration with no caBundle and cainjector's annotation under an injectedByCertManager mapping: allowed", func(t *testing.T) {
		// The fill is allowed once the CA it will bring can be read: the
		// policy shape learns it at the guard's next pass after the
		// Secret's creation. A refused CREATE stores nothing: retry it.
		framework.Eventually(t, 20*time.Second, "the owner's CREATE awaiting cainjector's fill is admitted", func() bool {
			_, err := f.owner.Create(ctx, framework.Spec{Kind: framework.Validating, Name: trustName, Annotations: inject, Bundles: [][]byte{nil, nil}}, metav1.CreateOptions{})
			return err == nil
		})
	})

	t.Run("cainjector fills it: allowed; emptying it afterwards: denied, the window closed at the fill", func(t *testing.T) {
		// The policy shape learns the CA from the configuration's
		// annotation at its next pass: retry the fill until then.
		var filled *framework.WebhookConfig
		framework.Eventually(t, 20*time.Second, "cainjector fills the caBundles", func() bool {
			got, err := cainjector.SetCABundle(ctx, framework.Validating, trustName, issuerCA.PEM)
			filled = got
			return err == nil
		})
		requireBundles(t, filled, issuerCA.PEM)

		for _, c := range []*framework.Client{cainjector, f.owner} {
			_, err := c.Mutate(ctx, framework.Validating, trustName, metav1.UpdateOptions{}, func(_ *metav1.ObjectMeta, bundles [][]byte) {
				bundles[1] = nil
			})
			denied(t, err, trustMapping, "ca-mismatch")
		}
		requireUnchanged(t, f.admin, framework.Validating, trustName, filled.ResourceVersion, issuerCA.PEM)
	})

	t.Run("the owner creates a configuration with no caBundle and no cainjector annotation under the injectedByCertManager mapping: denied", func(t *testing.T) {
		if err := f.admin.Delete(ctx, framework.Validating, trustName, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", trustName, err)
		}
		_, err := f.owner.Create(ctx, framework.Spec{Kind: framework.Validating, Name: trustName}, metav1.CreateOptions{})
		denied(t, err, trustMapping, "ca-mismatch", "no caBundle", systemRoots)
	})
}

// updateValidating reads a ValidatingWebhookConfiguration as c, lets fn
// change it and writes it back (a plain UPDATE, as controllers do).
func updateValidating(ctx context.Context, c *framework.Client, name string, fn func(*admv1.ValidatingWebhookConfiguration)) (*admv1.ValidatingWebhookConfiguration, error) {
	api := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	o, err := api.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	fn(o)
	return api.Update(ctx, o, metav1.UpdateOptions{})
}
