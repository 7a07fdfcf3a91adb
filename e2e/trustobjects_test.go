package e2e

// CRD conversion webhooks and APIServices under the ownership rules: the
// same mapping, CA source and real cainjector as the webhook
// configurations, on the two kinds whose caBundle kube-apiserver also
// trusts.

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

const (
	widgetsMapping = "widgets"
	injectedCRD    = "widgets.e2e.webhook-guard.io"
	injectedAPISvc = "v1.metrics.e2e.webhook-guard.io"
	// unnamedCRD is a CRD no mapping names: the guard never sees its writes.
	unnamedCRD = "gadgets.e2e.webhook-guard.io"
	// trustRotations is how many CA rotations cainjector makes through the
	// guard (each kind already rotates ten times in the webhook
	// configurations' tests; this proves the two kinds' paths).
	trustRotations = 3
)

var trustTargets = []injectedTarget{{framework.CRD, injectedCRD, 1}, {framework.APIService, injectedAPISvc, 1}}

// widgetsConfig maps the CRD's conversion webhook and the APIService to the
// application, with the CA their cert-manager annotation names.
func widgetsConfig(mode guardapi.Mode) *guardapi.GuardConfig {
	cfg := guardConfig(guardapi.Owner{
		Name:    widgetsMapping,
		Mode:    mode,
		Match:   guardapi.Match{CustomResourceDefinitions: []string{injectedCRD}, APIServices: []string{injectedAPISvc}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{appNamespace + "/" + ownerSA}},
		CA:      guardapi.CASource{InjectedByCertManager: &guardapi.InjectedByCertManager{}},
	})
	cfg.CertManager.CAInjectorServiceAccount = framework.CAInjectorNamespace + "/" + framework.CAInjectorServiceAccount
	return cfg
}

// TestTrustObjectsStaticShape: cert-manager's cainjector injects the
// Certificate's CA into a CRD's conversion webhook and an APIService and
// rotates it through the static webhook in enforce mode without a refusal;
// a service account that is no writer may update the CRD (its schema is
// its installer's) but not its caBundle; the owner's controller writing
// its own CA is ca-mismatch; a CRD no mapping names is never sent to the
// guard; and the decisions are recorded under the objects' own kinds.
func TestTrustObjectsStaticShape(t *testing.T) {
	t.Parallel()
	r := startInjectorRun(t, injectorRunOptions{opts: framework.Options{Config: widgetsConfig(guardapi.ModeEnforce)}, targets: trustTargets})
	ctx := t.Context()

	for i := 1; i <= trustRotations; i++ {
		r.rotate(t, i)
	}
	t.Log(r.rotationSummary())
	r.requireNoCAInjectorDenials(t)

	t.Run("a service account that is no writer may update the CRD but not its caBundle", func(t *testing.T) {
		if _, err := r.f.intruder.Annotate(ctx, framework.CRD, injectedCRD, "e2e/installed-by", intruderSA); err != nil {
			t.Fatalf("an update that leaves the conversion webhook's caBundle alone was refused: %v", err)
		}
		for _, tg := range trustTargets {
			_, err := r.f.intruder.SetCABundle(ctx, tg.kind, tg.name, r.cert.CA.PEM)
			requireDenied(t, err, `(mapping "widgets", enforce)`, "not-owner", intruderUser.Name)
		}
		_, err := r.f.intruder.SetCABundle(ctx, framework.CRD, injectedCRD, nil)
		requireDenied(t, err, "not-owner")
	})

	t.Run("the owner's controller writing its own CA is denied", func(t *testing.T) {
		own := framework.NewCA(t, "app-self-generated-ca")
		r.others = append(r.others, own)
		_, err := r.f.owner.SetCABundle(ctx, framework.CRD, injectedCRD, own.PEM)
		requireDenied(t, err, "ca-mismatch", "spec.conversion.webhook.clientConfig.caBundle", "found "+own.Fingerprint()[:16])
		_, err = r.f.owner.SetCABundle(ctx, framework.APIService, injectedAPISvc, own.PEM)
		requireDenied(t, err, "ca-mismatch", "spec.caBundle", "found "+own.Fingerprint()[:16])
		if !r.converged(t) {
			t.Fatalf("the stored caBundles changed although the writes were denied:%s", r.stateOf(t))
		}
	})

	t.Run("a CRD no mapping names is not the guard's", func(t *testing.T) {
		before := len(r.f.env.Guard.Records())
		foreign := framework.NewCA(t, "unrelated-ca")
		r.f.intruder.MustCreate(t, framework.Spec{Kind: framework.CRD, Name: unnamedCRD, Bundles: [][]byte{foreign.PEM}})
		// kube-apiserver writes a new CRD's status (Established) right
		// after the create: retry the read-modify-write on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			_, err := r.f.intruder.SetCABundle(ctx, framework.CRD, unnamedCRD, nil)
			return err
		})
		if err != nil {
			t.Fatalf("a write of a CRD no mapping names was refused: %v", err)
		}
		if err := r.f.intruder.Delete(ctx, framework.CRD, unnamedCRD, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting a CRD no mapping names was refused: %v", err)
		}
		if after := len(r.f.env.Guard.Records()); after != before {
			t.Errorf("the guard recorded %d decisions about %s; kube-apiserver should not send it writes of an unnamed CRD", after-before, unnamedCRD)
		}
	})

	kinds := map[string]int{}
	for _, rec := range r.f.env.Guard.Records() {
		if rec.Outcome == "deny" {
			kinds[rec.Kind]++
		}
	}
	t.Logf("denials recorded by kind: %v", kinds)
	if kinds[string(framework.CRD)] < 3 || kinds[string(framework.APIService)] < 2 {
		t.Errorf("denials recorded by kind: %v; want the CRD's three and the APIService's two", kinds)
	}
}

// TestTrustObjectsPolicyShape: the same objects under the generated
// policies. The mapping names the Certificate cainjector injects from
// (policy shape resolves injectedByCertManager from webhook configurations
// only) and cainjector as a writer. The guard may read Secrets as params
// (the chart's policy.caParams), so the -crds-ca and -apiservices-ca
// policies read the Certificate's Secret: every rotation converges with no
// refusal of cainjector, a non-writer may update the CRD but not its
// caBundle, and the owner's foreign CA is denied.
func TestTrustObjectsPolicyShape(t *testing.T) {
	t.Parallel()
	opts := policyOptions()
	cfg := guardConfig(guardapi.Owner{
		Name:  widgetsMapping,
		Mode:  guardapi.ModeEnforce,
		Match: guardapi.Match{CustomResourceDefinitions: []string{injectedCRD}, APIServices: []string{injectedAPISvc}},
		Writers: guardapi.Subjects{ServiceAccounts: []string{
			appNamespace + "/" + ownerSA, framework.CAInjectorNamespace + "/" + framework.CAInjectorServiceAccount,
		}},
		CA: guardapi.CASource{Certificate: &guardapi.ObjectRef{Namespace: appNamespace, Name: injectedCert}},
	})
	opts.Config = cfg
	crdPolicy := vap.PolicyName(widgetsMapping) + "-crds"
	r := startInjectorRun(t, injectorRunOptions{opts: opts, targets: trustTargets, beforeInjector: func(t *testing.T, r *injectorRun) {
		foreign := framework.NewCA(t, "probe").PEM
		framework.Eventually(t, 30*time.Second, "kube-apiserver checks the CRD's caBundle against the Certificate's CA", func() bool {
			_, err := r.f.owner.Mutate(t.Context(), framework.CRD, injectedCRD, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}},
				func(_ *metav1.ObjectMeta, bundles [][]byte) { bundles[0] = foreign })
			return err != nil && strings.Contains(err.Error(), "ca-mismatch")
		})
	}})
	ctx := t.Context()

	for i := 1; i <= trustRotations; i++ {
		r.rotate(t, i)
	}
	t.Log(r.rotationSummary())
	r.requireNoCAInjectorDenials(t)

	t.Run("a service account that is no writer may update the CRD but not its caBundle", func(t *testing.T) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			_, err := r.f.intruder.Annotate(ctx, framework.CRD, injectedCRD, "e2e/installed-by", intruderSA)
			return err
		})
		if err != nil {
			t.Fatalf("an update that leaves the conversion webhook's caBundle alone was refused: %v", err)
		}
		_, err = r.f.intruder.SetCABundle(ctx, framework.CRD, injectedCRD, r.cert.CA.PEM)
		requirePolicyDenied(t, err, crdPolicy, "not-owner")
		_, err = r.f.intruder.SetCABundle(ctx, framework.APIService, injectedAPISvc, nil)
		requirePolicyDenied(t, err, vap.PolicyName(widgetsMapping)+"-apiservices", "not-owner")
	})

	t.Run("the owner's controller writing its own CA is denied", func(t *testing.T) {
		own := framework.NewCA(t, "app-self-generated-ca")
		r.others = append(r.others, own)
		_, err := r.f.owner.SetCABundle(ctx, framework.CRD, injectedCRD, own.PEM)
		requirePolicyDenied(t, err, vap.CAPolicyName(crdPolicy), "ca-mismatch", "spec.conversion.webhook.clientConfig.caBundle")
		_, err = r.f.owner.SetCABundle(ctx, framework.APIService, injectedAPISvc, own.PEM)
		requirePolicyDenied(t, err, vap.CAPolicyName(vap.PolicyName(widgetsMapping)+"-apiservices"), "ca-mismatch", "spec.caBundle")
		if !r.converged(t) {
			t.Fatalf("the stored caBundles changed although the writes were denied:%s", r.stateOf(t))
		}
	})
}
