package policysync

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/webhook-guard/webhook-guard/policy"
	"github.com/webhook-guard/webhook-guard/policy/vap"
)

// Test_Syncer_ownership: the guard restores by name what it generates and
// deletes only what it generated, whatever the managed-by label says.
func Test_Syncer_ownership(t *testing.T) {
	ctx := context.Background()
	withAnchor := func(t *testing.T, name, uid string) *env {
		e := newEnv(t, testConfig)
		require.NoError(t, e.client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("u-" + uid)}}))
		e.syncer.Anchor = name
		return e
	}
	// What an editor does to a generated binding: each leaves it the
	// guard's by its generated name, restored at the next pass.
	edits := map[string]func(b *admv1.ValidatingAdmissionPolicyBinding){
		"if someone removes the managed-by label of a generated binding, the guard restores it": func(b *admv1.ValidatingAdmissionPolicyBinding) {
			delete(b.Labels, vap.LabelManagedBy)
		},
		"if someone clears the label, owner references and managed fields of a generated binding and switches it to Audit, the guard restores it by its name": func(b *admv1.ValidatingAdmissionPolicyBinding) {
			b.Labels, b.OwnerReferences = nil, nil
			b.ManagedFields = []metav1.ManagedFieldsEntry{{}} // kube-apiserver's way to clear them
			b.Spec.ValidationActions = []admv1.ValidationAction{admv1.Audit}
		},
	}
	for edit, change := range edits {
		t.Run(edit, func(t *testing.T) {
			for name, anchor := range map[string]string{"with an anchor": "wg-policy-anchor", "without an anchor": ""} {
				t.Run(name, func(t *testing.T) {
					e := newEnv(t, testConfig)
					if anchor != "" {
						e = withAnchor(t, anchor, "1")
					}
					require.NoError(t, e.syncer.Sync(ctx))
					var b admv1.ValidatingAdmissionPolicyBinding
					require.NoError(t, e.client.Get(ctx, client.ObjectKey{Name: "webhook-guard-app"}, &b))
					change(&b)
					require.NoError(t, e.client.Update(ctx, &b, client.FieldOwner("someone")))

					require.NoError(t, e.syncer.Sync(ctx), "the binding is the guard's by its generated name, not a foreign object")
					require.NoError(t, e.client.Get(ctx, client.ObjectKey{Name: "webhook-guard-app"}, &b))
					assert.Equal(t, vap.ManagedBy, b.Labels[vap.LabelManagedBy], "the label is back, so the watch sees it again")
					assert.Equal(t, []admv1.ValidationAction{admv1.Deny}, b.Spec.ValidationActions, "enforced")
					assert.Empty(t, e.syncer.lastRefused(), "no mapping is reported refused")
					assert.Equal(t, 0.0, e.writes(kindAdmissionPolicyBinding, VerbDelete))
				})
			}
		})
	}
	t.Run("if another release's labelled objects exist, the guard leaves them alone", func(t *testing.T) {
		e := withAnchor(t, "wg-policy-anchor", "1")
		require.NoError(t, e.client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "second-policy-anchor", UID: "u-2"}}))
		second := metav1.ObjectMeta{Name: "webhook-guard-team-b", Labels: vap.Labels("team-b"),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "second-policy-anchor", UID: "u-2"}}}
		require.NoError(t, e.client.Create(ctx, &admv1.ValidatingAdmissionPolicy{ObjectMeta: second}))
		require.NoError(t, e.client.Create(ctx, &admv1.ValidatingAdmissionPolicyBinding{ObjectMeta: second,
			Spec: admv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: second.Name, ValidationActions: []admv1.ValidationAction{admv1.Deny}}}))

		require.NoError(t, e.syncer.Sync(ctx))
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, 0.0, e.writes(kindAdmissionPolicy, VerbDelete))
		assert.Equal(t, 0.0, e.writes(kindAdmissionPolicyBinding, VerbDelete))
		require.NoError(t, e.client.Get(ctx, client.ObjectKey{Name: second.Name}, &admv1.ValidatingAdmissionPolicy{}))
		require.NoError(t, e.client.Get(ctx, client.ObjectKey{Name: second.Name}, &admv1.ValidatingAdmissionPolicyBinding{}))
	})
	t.Run("if a mapping of this release is removed, its objects are still deleted", func(t *testing.T) {
		e := withAnchor(t, "wg-policy-anchor", "1")
		require.NoError(t, e.syncer.Sync(ctx))
		c := *e.config
		c.Spec.Owners = c.Spec.Owners[:1]
		cfg, err := policy.Load(mustYAML(t, c.Spec))
		require.NoError(t, err)
		e.config = cfg
		require.NoError(t, e.syncer.Sync(ctx))
		assert.Equal(t, 1.0, e.writes(kindAdmissionPolicy, VerbDelete))
		assert.Equal(t, 1.0, e.writes(kindAdmissionPolicyBinding, VerbDelete))
	})
}
