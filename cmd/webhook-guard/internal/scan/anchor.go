package scan

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CheckPolicyAnchor is the scan check of the policy shape's anchor.
const CheckPolicyAnchor = "policy-anchor"

// scanAnchor checks that the policy shape's anchor ClusterRole exists: once
// it is gone, the garbage collector deletes every generated policy and the
// guard writes none, so no mapping is enforced. One GET; nothing when no
// anchor is named.
func scanAnchor(ctx context.Context, c client.Reader, anchor string) ([]Finding, error) {
	if anchor == "" {
		return nil, nil
	}
	var role rbacv1.ClusterRole
	err := c.Get(ctx, types.NamespacedName{Name: anchor}, &role)
	ref := "ClusterRole/" + anchor
	fix := "run `helm upgrade` on the guard's release: it creates the anchor again, and the guard then recreates every policy"
	switch {
	case apierrors.IsNotFound(err):
		return []Finding{{Level: LevelFail, Check: CheckPolicyAnchor, Configuration: ref,
			Detail: "the policy anchor does not exist: every generated ValidatingAdmissionPolicy was garbage collected and no mapping is enforced", Suggestion: fix}}, nil
	case err != nil:
		return nil, fmt.Errorf("get the policy anchor ClusterRole %q: %w", anchor, err)
	case role.DeletionTimestamp != nil:
		return []Finding{{Level: LevelFail, Check: CheckPolicyAnchor, Configuration: ref,
			Detail: "the policy anchor is being deleted: every generated ValidatingAdmissionPolicy is being garbage collected", Suggestion: fix}}, nil
	}
	return nil, nil
}
