package e2e

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// TestObserverRecordsForeignWritesRevertedAtOnce: in the policy shape's
// audit mode a writer of the mapping writes its own CA and the owner's
// writer puts the owner's CA back at once, five times: the fight between
// an app's controller and cert-manager's cainjector, which re-injects
// within a second. The observer is the only recorder here, and each
// foreign write waits out its 1 s mismatch grace on its queue while the
// revert arrives: `webhook-guard review` shows every foreign write as an
// observed ca-mismatch, counted once each.
func TestObserverRecordsForeignWritesRevertedAtOnce(t *testing.T) {
	t.Parallel()
	const (
		name     = "reverted-webhooks"
		intruder = "app-intruder"
		rounds   = 5
	)
	owner := mapping("reverted", guardapi.ModeAudit, name, caFromSecret())
	owner.Writers.ServiceAccounts = append(owner.Writers.ServiceAccounts, appNamespace+"/"+intruder)
	opts := policyOptions("--records-flush-interval", "1s")
	opts.Config = guardConfig(owner)
	opts.ReportCRDs = true
	f := newFixture(t, opts)
	waitPolicyActive(t, f)
	ctx := t.Context()
	f.create(t, framework.Validating, name, f.ownerCA.PEM)

	injector := f.env.ServiceAccount(t, appNamespace, ownerSA)
	app := f.env.ServiceAccount(t, appNamespace, intruder)
	foreign := framework.NewCA(t, intruder+"-ca")
	framework.Eventually(t, 20*time.Second, "kube-apiserver audits the mapping's policy", func() bool {
		app.Warnings.Take()
		_, err := app.Mutate(ctx, framework.Validating, name, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, setAll(foreign.PEM))
		return err == nil && len(framework.Containing(app.Warnings.Take(), "would deny")) > 0
	})

	for i := range rounds {
		if _, err := app.Mutate(ctx, framework.Validating, name, metav1.UpdateOptions{FieldManager: intruder}, setAll(foreign.PEM)); err != nil {
			t.Fatalf("round %d: the app's foreign write: %v", i, err)
		}
		if _, err := injector.Mutate(ctx, framework.Validating, name, metav1.UpdateOptions{FieldManager: "injector"}, setAll(f.ownerCA.PEM)); err != nil {
			t.Fatalf("round %d: the owner's revert: %v", i, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	kubeconfig := f.env.Kubeconfig(t, envtest.User{Name: "e2e-reviewer", Groups: []string{"system:masters"}})
	subject := policy.ObservedSubjectPrefix + intruder
	var counted int
	var res reviewResult
	framework.Eventually(t, 20*time.Second, "every foreign write reaches the ClusterReport", func() bool {
		res, _ = reviewJSON(t, "--kubeconfig", kubeconfig, "--mapping", "reverted")
		counted = 0
		for _, fd := range res.Findings {
			if fd.Origin == "observed" && fd.Rule == "ca-mismatch" && fd.Subject == subject {
				counted += fd.Count
			}
		}
		return counted >= rounds
	})
	if counted != rounds {
		t.Errorf("review counts %d observed ca-mismatch writes by %s; want %d, one per foreign write\n%+v", counted, subject, rounds, res.Findings)
	}
	for _, fd := range res.Findings {
		if fd.Origin == "observed" && fd.Rule == "ca-mismatch" && fd.Subject != subject {
			t.Errorf("the owner's revert was recorded as a ca-mismatch: %+v", fd)
		}
	}
}
