package policysync

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// secretParamsRecheck is how long the answer to "may the guard get every
// Secret" is used before it is asked again.
const secretParamsRecheck = 10 * time.Minute

// mayUseSecretParams reports whether the guard may write a policy whose
// param is a Secret: kube-apiserver requires of whoever creates a policy
// with paramKind Secret "get" on every Secret in the cluster (the policy
// could read any of them). The chart grants it with policy.caParams; without
// it, the policies hold the CA as a literal only, and a rotation races the
// guard's next pass.
//
// The answer is asked again every secretParamsRecheck, so that a quiet
// leader sends no request per pass and an RBAC change (a helm upgrade that
// sets policy.caParams) still takes effect without a restart.
func (s *Syncer) mayUseSecretParams(ctx context.Context) bool {
	s.mu.Lock()
	if s.secretParams != nil && time.Since(s.secretParamsAsked) < secretParamsRecheck {
		defer s.mu.Unlock()
		return *s.secretParams
	}
	s.mu.Unlock()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "secrets"},
	}}
	err := s.Client.Create(ctx, review)
	allowed := err == nil && review.Status.Allowed
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.secretParamsAsked = time.Now()
	}
	if s.secretParams == nil || *s.secretParams != allowed {
		s.secretParams = &allowed
		if allowed {
			s.Log.Info("policy shape: the policies read their CA Secrets as params (the guard may get Secrets cluster-wide)")
		} else {
			s.Log.Info("policy shape: the policies hold the CA as a literal only; grant get on Secrets cluster-wide (chart value policy.caParams) so that a CA rotation reaches kube-apiserver as it reaches the writer", "reason", errText(err))
		}
	}
	return allowed
}

func errText(err error) string {
	if err == nil {
		return "not allowed"
	}
	return err.Error()
}

// anchor reads the anchor ClusterRole's uid; nil when no anchor is set.
// A missing anchor (or one being deleted) is reported once per
// disappearance and keeps the pass from writing.
func (s *Syncer) anchor(ctx context.Context) (*metav1.OwnerReference, error) {
	if s.Anchor == "" {
		return nil, nil //nolint:nilnil // no anchor configured: the objects get no owner reference
	}
	var role rbacv1.ClusterRole
	err := s.Reader.Get(ctx, types.NamespacedName{Name: s.Anchor}, &role)
	var missing error
	switch {
	case apierrors.IsNotFound(err):
		missing = fmt.Errorf("the anchor ClusterRole %q does not exist (the guard is being uninstalled, someone deleted it, or --policy-anchor names the wrong ClusterRole): "+
			"writing nothing, since generated objects without it would outlive the guard; `helm upgrade` creates it again", s.Anchor)
	case err != nil:
		return nil, fmt.Errorf("get the anchor ClusterRole %q: %w", s.Anchor, err)
	case role.DeletionTimestamp != nil:
		missing = fmt.Errorf("the anchor ClusterRole %q is being deleted: writing nothing, the garbage collector is removing the generated objects", s.Anchor)
	}
	s.reportAnchor(missing)
	if missing != nil {
		return nil, missing
	}
	return vap.AnchorReference(role.Name, role.UID), nil
}

// reportAnchor sets the anchor gauge and, when the anchor has just gone
// missing, writes an Event about it.
func (s *Syncer) reportAnchor(missing error) {
	present := 1.0
	if missing != nil {
		present = 0
	}
	s.Metrics.AnchorPresent.WithLabelValues(s.Anchor).Set(present)
	s.mu.Lock()
	changed := s.anchorMissing != (missing != nil)
	s.anchorMissing = missing != nil
	s.mu.Unlock()
	if !changed {
		return
	}
	if missing == nil {
		s.Log.Info("policy shape: the anchor ClusterRole exists again; writing the generated objects", "anchor", s.Anchor)
		return
	}
	s.Log.Error(missing, "policy shape: the anchor ClusterRole is gone; every generated policy is being garbage collected and no mapping is enforced", "anchor", s.Anchor)
	if s.Events != nil {
		ref := &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: s.Anchor}}
		s.Events.Eventf(ref, nil, "Warning", ReasonAnchorMissing, "Sync", "%s; no mapping is enforced until it exists again", missing.Error())
	}
}
