package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/webhook/policysync"
)

// TestPolicyModeCostLimit: on a real kube-apiserver, under the CA Secret
// param, a configuration of 300 entries holding different bundles, whose
// owner's rotation (cainjector's merge) once cost more than
// kube-apiserver's CEL limit, is decided within it: each entry is looked
// up in the stored object through a map, so the cost grows with the
// caBundle bytes and not with the square of the entries. The guard's gauge
// shows it under the margin, the policies fail closed (no write is ever
// admitted because its evaluation ran out of budget), the owner's merge is
// admitted, and the owner's write of every entry as stored plus a foreign
// CA in one entry, admitted unchecked while the guard relaxed such a
// mapping to failurePolicy Ignore, is denied ca-mismatch. A non-writer is
// denied not-owner.
func TestPolicyModeCostLimit(t *testing.T) {
	const bigMapping, bigName = "big", "big-webhooks"
	opts := policyOptions()
	opts.Config = guardConfig(mapping(bigMapping, guardapi.ModeEnforce, bigName, caFromSecret()))
	f := newFixture(t, opts)
	ctx := t.Context()
	waitPolicyActive(t, f)
	previous := framework.NewCA(t, "previous-ca")
	// Every other entry holds the previous CA: the merge is checked entry
	// by entry, not as one bundle written into every entry.
	bundles := make([][]byte, 300)
	for i := range bundles {
		bundles[i] = f.ownerCA.PEM
		if i%2 == 1 {
			bundles[i] = previous.PEM
		}
	}
	f.create(t, framework.Validating, bigName, bundles...)

	ratio := func() float64 {
		return f.env.Guard.Metric(t, "webhook_guard_policy_worst_write_cost_ratio",
			map[string]string{"mapping": bigMapping, "configuration": "ValidatingWebhookConfiguration/" + bigName})
	}
	framework.Eventually(t, 30*time.Second, "the guard measures the configuration", func() bool { return ratio() > 0 })
	t.Logf("worst write cost ratio, 300 entries holding different bundles: %.2f", ratio())
	if r := ratio(); r >= policysync.CostMargin {
		t.Errorf("300 entries: ratio %.2f, want under the margin %.1f", r, policysync.CostMargin)
	}
	list, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list policies: %v", err)
	}
	for _, p := range list.Items {
		if *p.Spec.FailurePolicy != admv1.Fail {
			t.Errorf("policy %s: failurePolicy %s, want Fail: a write too costly to decide must be refused, not admitted", p.Name, *p.Spec.FailurePolicy)
		}
	}
	if near := eventsWithReason(t, f, policysync.ReasonPolicyCostNearLimit); len(near) > 0 {
		t.Errorf("PolicyCostNearLimit Events for a configuration under the margin: %q", near)
	}

	// Every entry as stored, plus a foreign CA after the owner's in the
	// last one: denied, and decided within the limit.
	foreign := framework.NewCA(t, "foreign-ca")
	_, err = f.owner.Mutate(ctx, framework.Validating, bigName, metav1.UpdateOptions{}, func(_ *metav1.ObjectMeta, bs [][]byte) {
		bs[len(bs)-1] = append(append([]byte{}, bs[len(bs)-1]...), foreign.PEM...)
	})
	requirePolicyDenied(t, err, vap.PolicyName(bigMapping), "ca-mismatch")
	if err != nil && strings.Contains(err.Error(), "cost limit") {
		t.Errorf("the foreign CA was refused for its cost, not decided: %v", err)
	}

	// The owner's merge (every entry: its stored bundle followed by the
	// CA) is admitted.
	if _, err := f.owner.Mutate(ctx, framework.Validating, bigName, metav1.UpdateOptions{}, func(_ *metav1.ObjectMeta, bs [][]byte) {
		for i := range bs {
			bs[i] = append(append([]byte{}, bs[i]...), f.ownerCA.PEM...)
		}
	}); err != nil {
		t.Fatalf("the owner's merge of 300 entries: %v", err)
	}
	// Not-owner still holds.
	_, err = f.intruder.SetCABundle(context.Background(), framework.Validating, bigName, f.ownerCA.PEM)
	requirePolicyDenied(t, err, vap.PolicyName(bigMapping), "not-owner")
}
