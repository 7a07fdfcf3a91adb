package vap

import (
	"fmt"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// The anchor's own policy. Deleting the anchor ClusterRole makes the garbage
// collector delete every generated policy and binding, which switches policy
// mode off; kube-apiserver evaluates ValidatingAdmissionPolicies for
// ClusterRoles (unlike for webhook configurations and for admission policy
// objects), so a policy can keep everyone but break-glass from doing that.
//
// It denies DELETE of the anchor, and an UPDATE that gives it rules or an
// aggregationRule (the anchor must stay a ClusterRole that grants nothing).
// Other updates pass, so that `helm upgrade` may relabel it whoever runs it.
// Break-glass (the configuration's breakGlass, and system:masters always,
// whom kube-apiserver's admission cannot stop anyway for long: they may
// delete this policy's binding) is exempt: deleting the anchor is the
// documented way to switch the policy shape off in an emergency.

// anchorPolicyPrefix starts the anchor policy's name. A mapping's policy
// names start with NamePrefix ("webhook-guard-"), so none can collide.
const anchorPolicyPrefix = "webhook-guard.anchor."

// AnchorPolicyName is the name of the policy (and binding) protecting the
// anchor ClusterRole called anchor.
func AnchorPolicyName(anchor string) string { return anchorPolicyPrefix + anchor }

// mastersGroup is exempt whatever breakGlass says: kube-apiserver's
// authorizer lets it do anything, and it is the last way back in.
const mastersGroup = "system:masters"

// AnchorPolicy builds the policy and binding that keep anyone but
// break-glass from deleting the anchor or giving it permissions. Both are
// owned by the anchor, as every generated object is.
func AnchorPolicy(spec *guardapi.GuardConfig, anchor *metav1.OwnerReference) (*admv1.ValidatingAdmissionPolicy, *admv1.ValidatingAdmissionPolicyBinding) {
	name := AnchorPolicyName(anchor.Name)
	bg := spec.BreakGlass
	bg.Groups = append(append([]string(nil), bg.Groups...), mastersGroup)
	breakGlass, _ := SubjectsExpression(bg)
	meta := metav1.ObjectMeta{Name: name, Labels: Labels(""), OwnerReferences: []metav1.OwnerReference{*anchor}}
	p := &admv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: meta,
		Spec: admv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				ResourceRules: []admv1.NamedRuleWithOperations{{
					ResourceNames: []string{anchor.Name},
					RuleWithOperations: admv1.RuleWithOperations{
						Operations: []admv1.OperationType{admv1.Update, admv1.Delete},
						Rule: admv1.Rule{
							APIGroups:   []string{"rbac.authorization.k8s.io"},
							APIVersions: []string{"*"},
							Resources:   []string{"clusterroles"},
							Scope:       ptr.To(admv1.ClusterScope),
						},
					},
				}},
				MatchPolicy: ptr.To(admv1.Equivalent),
			},
			FailurePolicy:   ptr.To(admv1.Fail),
			MatchConditions: []admv1.MatchCondition{{Name: "not-break-glass", Expression: "!(" + breakGlass + ")"}},
			Variables:       []admv1.Variable{{Name: "username", Expression: requestUser}},
			Validations: []admv1.Validation{{
				// A deletecollection is admitted per object, as a DELETE.
				Expression: `request.operation != "DELETE"`,
				Message:    fmt.Sprintf("webhook-guard: the ClusterRole %q anchors the policy shape: deleting it deletes every generated policy; only break-glass may", anchor.Name),
				MessageExpression: CELString(fmt.Sprintf("webhook-guard denied DELETE of ClusterRole %q by \"", anchor.Name)) + ` + variables.username + ` +
					CELString("\": it anchors the policy shape (deleting it garbage-collects every generated ValidatingAdmissionPolicy and binding); only break-glass may delete it; `helm uninstall` as a break-glass subject removes it"),
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}, {
				// kube-apiserver hands CEL a ClusterRole whose rules may be
				// present and null (rules has no omitempty): size(null) is
				// an error, so null is tested first.
				Expression: `request.operation != "UPDATE" || ` +
					`((!has(object.rules) || type(object.rules) == null_type || size(object.rules) == 0) && ` +
					`(!has(object.aggregationRule) || type(object.aggregationRule) == null_type))`,
				Message: fmt.Sprintf("webhook-guard: the ClusterRole %q anchors the policy shape and must grant nothing: no rules, no aggregationRule", anchor.Name),
				Reason:  ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	b := &admv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: *meta.DeepCopy(),
		Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admv1.ValidationAction{admv1.Deny},
		},
	}
	return p, b
}
