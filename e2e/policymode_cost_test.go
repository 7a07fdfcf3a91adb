package e2e

import (
	"context"
	"slices"
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
// owner's rotation (cainjector's merge) would cost more than
// kube-apiserver's CEL limit, is reported by the guard (the cost gauge over
// 1, an error log naming the mapping, configuration, entries and limit,
// one PolicyCostNearLimit Event about its policy) and its mapping's
// policies get failurePolicy Ignore: the owner's merge is admitted instead
// of refused with "actual cost limit exceeded", while a non-writer is still
// denied not-owner. A 300-entry configuration of the other mapping whose
// entries hold one bundle is not flagged, its policies still fail closed,
// and its owner's merge is decided (and admitted) within the limit.
func TestPolicyModeCostLimit(t *testing.T) {
	const bigMapping, bigName, smallMapping, smallName = "big", "big-webhooks", "uniform", "uniform-webhooks"
	opts := policyOptions()
	opts.Config = guardConfig(mapping(bigMapping, guardapi.ModeEnforce, bigName, caFromSecret()),
		mapping(smallMapping, guardapi.ModeEnforce, smallName, caFromSecret()))
	f := newFixture(t, opts)
	ctx := t.Context()
	waitPolicyActive(t, f)
	previous := framework.NewCA(t, "previous-ca")
	// bundles are n entries' caBundles: every one the owner's CA, or (mixed)
	// every other one the previous CA, whose merge is checked entry by
	// entry.
	bundles := func(n int, mixed bool) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = f.ownerCA.PEM
			if mixed && i%2 == 1 {
				out[i] = previous.PEM
			}
		}
		return out
	}
	f.create(t, framework.Validating, bigName, bundles(300, true)...)
	f.create(t, framework.Validating, smallName, bundles(300, false)...)

	ratio := func(mapping, name string) float64 {
		return f.env.Guard.Metric(t, "webhook_guard_policy_worst_write_cost_ratio",
			map[string]string{"mapping": mapping, "configuration": "ValidatingWebhookConfiguration/" + name})
	}
	failurePolicy := func(mapping string) []admv1.FailurePolicyType {
		list, err := f.env.AdminKube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list policies: %v", err)
		}
		var out []admv1.FailurePolicyType
		for _, p := range list.Items {
			if p.Name == vap.PolicyName(mapping) || p.Name == vap.CAPolicyName(vap.PolicyName(mapping)) {
				out = append(out, *p.Spec.FailurePolicy)
			}
		}
		return out
	}
	framework.Eventually(t, 30*time.Second, "the guard measures both configurations", func() bool {
		return ratio(bigMapping, bigName) > 0 && ratio(smallMapping, smallName) > 0
	})
	big, small := ratio(bigMapping, bigName), ratio(smallMapping, smallName)
	t.Logf("worst write cost ratio: 300 entries holding different bundles %.2f, one bundle %.2f", big, small)
	if big <= 1 {
		t.Errorf("300 entries: ratio %.2f, want over 1 (kube-apiserver refuses the merge)", big)
	}
	if small >= 0.8 {
		t.Errorf("300 entries holding one bundle: ratio %.2f, want under the margin 0.8", small)
	}
	framework.Eventually(t, 10*time.Second, "the costly mapping's policies have failurePolicy Ignore", func() bool {
		fp := failurePolicy(bigMapping)
		return len(fp) > 0 && !slices.Contains(fp, admv1.Fail)
	})
	if fp := failurePolicy(smallMapping); len(fp) == 0 || slices.Contains(fp, admv1.Ignore) {
		t.Errorf("the one-bundle mapping's policies: failurePolicy %v, want Fail", fp)
	}
	var near []string
	framework.Eventually(t, 10*time.Second, "a PolicyCostNearLimit Event about the costly mapping's policy", func() bool {
		near = eventsWithReason(t, f, policysync.ReasonPolicyCostNearLimit)
		return len(near) > 0
	})
	if len(near) != 1 || !strings.HasPrefix(near[0], "ValidatingAdmissionPolicy/"+vap.PolicyName(bigMapping)+": ") {
		t.Errorf("PolicyCostNearLimit Events: %q; want one about %s", near, vap.PolicyName(bigMapping))
	}
	var logged string
	for line := range strings.SplitSeq(f.env.Guard.Log.String(), "\n") {
		if strings.Contains(line, "over the guard's margin") {
			logged = line
		}
	}
	for _, want := range []string{`owners[big]: ValidatingWebhookConfiguration big-webhooks has 300 entries: kube-apiserver would refuse the owner's merge for its CEL cost`, `"limit":1000000`} {
		if !strings.Contains(logged, want) {
			t.Errorf("the guard's error log %q does not contain %q", logged, want)
		}
	}

	// The owner's merge (every entry: its stored bundle followed by the
	// CA) is admitted once kube-apiserver runs the relaxed policies.
	merge := func(_ *metav1.ObjectMeta, bs [][]byte) {
		for i := range bs {
			bs[i] = append(append([]byte{}, bs[i]...), f.ownerCA.PEM...)
		}
	}
	var err error
	framework.Eventually(t, 10*time.Second, "the owner's merge of 300 entries is admitted", func() bool {
		_, err = f.owner.Mutate(ctx, framework.Validating, bigName, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}, merge)
		return err == nil
	})
	if _, err := f.owner.Mutate(ctx, framework.Validating, bigName, metav1.UpdateOptions{}, merge); err != nil {
		t.Fatalf("the owner's merge: %v", err)
	}
	// One bundle in every entry: the merge is decided in one pass over
	// each object, under failurePolicy Fail.
	if _, err := f.owner.Mutate(ctx, framework.Validating, smallName, metav1.UpdateOptions{}, merge); err != nil {
		t.Fatalf("the owner's merge of 300 entries holding one bundle: %v", err)
	}
	foreign := framework.NewCA(t, "foreign-ca")
	_, err = f.owner.Mutate(ctx, framework.Validating, smallName, metav1.UpdateOptions{}, func(_ *metav1.ObjectMeta, bs [][]byte) {
		bs[len(bs)-1] = append(append([]byte{}, bs[len(bs)-1]...), foreign.PEM...)
	})
	requirePolicyDenied(t, err, vap.CAPolicyName(vap.PolicyName(smallMapping)), "ca-mismatch")
	// Not-owner still holds.
	_, err = f.intruder.SetCABundle(context.Background(), framework.Validating, bigName, f.ownerCA.PEM)
	requirePolicyDenied(t, err, vap.PolicyName(bigMapping), "not-owner")
}
