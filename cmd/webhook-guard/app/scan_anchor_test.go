package app

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/webhook-guard/webhook-guard/webhook"
)

func Test_scanPolicyAnchor(t *testing.T) {
	scheme, err := webhook.NewScheme()
	require.NoError(t, err)
	require.NoError(t, rbacv1.AddToScheme(scheme))
	opts := &scanOptions{out: outputFlags{format: "json"}, expiryThreshold: time.Hour, dialTimeout: time.Second, policyAnchor: "wg-webhook-guard-policy-anchor"}
	t.Run("if the policy anchor is missing, fail naming it and the fix", func(t *testing.T) {
		var out bytes.Buffer
		err := runScan(t.Context(), fake.NewClientBuilder().WithScheme(scheme).Build(), nil, opts, time.Now(), &out)
		var ee *exitError
		require.True(t, errors.As(err, &ee), "err = %v", err)
		assert.Equal(t, ExitDenied, ee.code)
		assert.Contains(t, out.String(), `"check": "policy-anchor"`)
		assert.Contains(t, out.String(), `"configuration": "ClusterRole/wg-webhook-guard-policy-anchor"`)
		assert.Contains(t, out.String(), "no mapping is enforced")
	})
	t.Run("if the policy anchor exists, find nothing", func(t *testing.T) {
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wg-webhook-guard-policy-anchor"}}).Build()
		var out bytes.Buffer
		require.NoError(t, runScan(t.Context(), c, nil, opts, time.Now(), &out), out.String())
	})
}
