package scan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/webhook"
)

func Test_scanAnchor(t *testing.T) {
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	require.NoError(t, rbacv1.AddToScheme(scheme))
	opts := Options{Now: time.Now(), ExpiryThreshold: time.Hour, DialTimeout: time.Second, PolicyAnchor: "wg-webhook-guard-policy-anchor"}
	t.Run("if the policy anchor is missing, fail naming it and the fix", func(t *testing.T) {
		res, err := Run(t.Context(), fake.NewClientBuilder().WithScheme(scheme).Build(), nil, opts)
		require.NoError(t, err)
		require.Len(t, res.Findings, 1)
		f := res.Findings[0]
		assert.Equal(t, 1, res.Problems)
		assert.Equal(t, LevelFail, f.Level)
		assert.Equal(t, CheckPolicyAnchor, f.Check)
		assert.Equal(t, "ClusterRole/wg-webhook-guard-policy-anchor", f.Configuration)
		assert.Contains(t, f.Detail, "no mapping is enforced")
	})
	t.Run("if the policy anchor exists, find nothing", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wg-webhook-guard-policy-anchor"}}).Build()
		res, err := Run(t.Context(), c, nil, opts)
		require.NoError(t, err)
		assert.Empty(t, res.Findings)
	})
}
