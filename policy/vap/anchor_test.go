package vap_test

import (
	"context"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/vap"
	"github.com/webhook-guard/webhook-guard/policy/vap/vaptest"
)

func anchorRole(extra map[string]any) *unstructured.Unstructured {
	o := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": "wg-policy-anchor", "labels": map[string]any{"helm.sh/chart": "webhook-guard-0.2.0"}},
	}
	maps.Copy(o, extra)
	return &unstructured.Unstructured{Object: o}
}

func Test_AnchorPolicy(t *testing.T) {
	spec := &guardapi.GuardConfig{BreakGlass: guardapi.Subjects{Users: []string{"oncall"}}}
	p, b := vap.AnchorPolicy(spec, vap.AnchorReference("wg-policy-anchor", "u1"))
	assert.Equal(t, "webhook-guard.anchor.wg-policy-anchor", p.Name)
	assert.Equal(t, p.Name, b.Spec.PolicyName)
	assert.Equal(t, []string{"wg-policy-anchor"}, p.Spec.MatchConstraints.ResourceRules[0].ResourceNames, "only the anchor is matched")
	assert.Equal(t, "u1", string(p.OwnerReferences[0].UID), "collected with the anchor, as every generated object")
	assert.Equal(t, vap.ManagedBy, p.Labels[vap.LabelManagedBy])
	v, err := vaptest.Compile(p)
	require.NoError(t, err)

	admin := &user.DefaultInfo{Name: "alice", Groups: []string{"platform-admins", "system:authenticated"}}
	masters := &user.DefaultInfo{Name: "kubernetes-admin", Groups: []string{"system:masters"}}
	oncall := &user.DefaultInfo{Name: "oncall"}
	withRules := anchorRole(map[string]any{"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get"}}}})
	aggregated := anchorRole(map[string]any{"aggregationRule": map[string]any{"clusterRoleSelectors": []any{map[string]any{"matchLabels": map[string]any{"x": "y"}}}}})
	relabelled := anchorRole(map[string]any{"rules": []any{}})
	nullRules := anchorRole(map[string]any{"rules": nil})
	for name, tc := range map[string]struct {
		op       admission.Operation
		obj      *unstructured.Unstructured
		user     user.Info
		deniedBy string
	}{
		"if a cluster admin who is not break-glass deletes the anchor, deny": {admission.Delete, nil, admin, `webhook-guard denied DELETE of ClusterRole "wg-policy-anchor" by "alice"`},
		"if system:masters deletes the anchor, allow (the last way back in)": {admission.Delete, nil, masters, ""},
		"if the configured break-glass deletes the anchor, allow":            {admission.Delete, nil, oncall, ""},
		"if helm relabels the anchor, allow whoever runs it":                 {admission.Update, relabelled, admin, ""},
		"if helm relabels the anchor with rules null, allow":                 {admission.Update, nullRules, admin, ""},
		"if someone gives the anchor rules, deny: it must grant nothing":     {admission.Update, withRules, admin, "must grant nothing"},
		"if someone makes the anchor aggregate roles, deny":                  {admission.Update, aggregated, admin, "must grant nothing"},
	} {
		t.Run(name, func(t *testing.T) {
			r := vaptest.Request{Operation: tc.op, Name: "wg-policy-anchor", User: tc.user, Old: anchorRole(nil)}
			if tc.op == admission.Update {
				r.Object = tc.obj
			}
			msgs := v.Validate(context.Background(), r)
			if tc.deniedBy == "" {
				assert.Empty(t, msgs)
				return
			}
			require.Len(t, msgs, 1)
			assert.Contains(t, msgs[0], tc.deniedBy)
		})
	}
}
