package e2e

import (
	"slices"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/webhook-guard/webhook-guard/e2e/framework"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// TestPolicySyncOwnsByIdentityNotLabel: on the real kube-apiserver, a
// generated binding whose managed-by label break-glass removed is applied
// again, label included (it left the guard's label-filtered watch, so
// before it was refused as someone else's object); so is one whose label,
// owner references and managed fields were all cleared and which was
// switched to Audit (it is the guard's by its generated name); and a
// labelled policy and binding of a second release (owned by another anchor
// ClusterRole) are not deleted as orphans.
func TestPolicySyncOwnsByIdentityNotLabel(t *testing.T) {
	t.Parallel()
	f := newFixture(t, policyOptions())
	waitPolicyActive(t, f)
	ctx := t.Context()
	adm := f.env.AdminKube.AdmissionregistrationV1()

	// A second release's objects: labelled alike, owned by its anchor.
	second := metav1.ObjectMeta{Name: "webhook-guard-second-release", Labels: vap.Labels("second-release"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "second-webhook-guard-policy-anchor", UID: "0b4c5e1e-0000-4000-8000-000000000002"}}}
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, &admv1.ValidatingAdmissionPolicy{ObjectMeta: second, Spec: admv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admv1.MatchResources{ResourceRules: []admv1.NamedRuleWithOperations{{RuleWithOperations: admv1.RuleWithOperations{
			Operations: []admv1.OperationType{admv1.Update},
			Rule:       admv1.Rule{APIGroups: []string{"admissionregistration.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"validatingwebhookconfigurations"}},
		}}}},
		Validations: []admv1.Validation{{Expression: "true"}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, &admv1.ValidatingAdmissionPolicyBinding{ObjectMeta: second, Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: second.Name, ValidationActions: []admv1.ValidationAction{admv1.Audit},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	name := vap.PolicyName(enforcedMapping)
	b, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(b.Labels, vap.LabelManagedBy)
	if _, err := adm.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{FieldManager: "hand-edit"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 20*time.Second, "the guard puts the binding's managed-by label back", func() bool {
		got, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Labels[vap.LabelManagedBy] == vap.ManagedBy
	})

	// All that marks it as the guard's cleared in one update (label, owner
	// references, managed fields) and the binding switched to Audit: its
	// generated name still makes it the guard's, restored and enforcing,
	// and the mapping is not reported refused.
	b, err = adm.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Labels, b.OwnerReferences = nil, nil
	b.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	b.Spec.ValidationActions = []admv1.ValidationAction{admv1.Audit}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{FieldManager: "hand-edit"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 20*time.Second, "the guard restores the disowned binding: label and Deny", func() bool {
		got, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Labels[vap.LabelManagedBy] == vap.ManagedBy && slices.Equal(got.Spec.ValidationActions, []admv1.ValidationAction{admv1.Deny})
	})
	if v := f.env.Guard.Metric(t, "webhook_guard_policy_mapping_refused", map[string]string{"mapping": enforcedMapping}); v != 0 {
		t.Errorf("webhook_guard_policy_mapping_refused{mapping=%q} is %g; want 0: the binding is the guard's", enforcedMapping, v)
	}

	// Several passes later (one every 2 s), the second release's objects remain.
	time.Sleep(5 * time.Second)
	if _, err := adm.ValidatingAdmissionPolicies().Get(ctx, second.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the second release's policy: %v; want it left alone", err)
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, second.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the second release's binding: %v; want it left alone", err)
	}
	waitPolicyActive(t, f)
}
