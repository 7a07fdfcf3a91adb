package policysync

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// noopUpdates is kube-apiserver answering an update that changes nothing:
// the object, its resourceVersion and its managed fields stay as they
// are. It counts the reads and updates sent through it.
type noopUpdates struct {
	client.Client
	gets, updates int
}

func (n *noopUpdates) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	n.gets++
	return n.Client.Get(ctx, key, obj, opts...)
}

func (n *noopUpdates) Update(ctx context.Context, obj client.Object, _ ...client.UpdateOption) error {
	n.updates++
	return n.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
}

// Test_Syncer_foreignDefaults: a field another manager owns whose value is
// what kube-apiserver defaults (so the guard's update of the generated spec
// changes nothing and the manager keeps the field) costs one Get and one
// Update per object version, not per pass.
func Test_Syncer_foreignDefaults(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, testConfig)
	require.NoError(t, e.syncer.Sync(ctx))
	var b admv1.ValidatingAdmissionPolicyBinding
	require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &b))
	// As kubectl apply of a manifest spelling out the default would.
	equivalent := admv1.Equivalent
	b.Spec.MatchResources = &admv1.MatchResources{MatchPolicy: &equivalent}
	require.NoError(t, e.client.Update(ctx, &b, client.FieldOwner("someone")))

	counting := &noopUpdates{Client: e.client}
	e.syncer.Client, e.syncer.Reader = counting, counting
	for range 5 {
		require.NoError(t, e.syncer.Sync(ctx))
	}
	assert.Equal(t, 1, counting.updates, "one update of the version found, none at later passes")
	assert.Equal(t, 0.0, e.writes(kindAdmissionPolicyBinding, VerbUpdate), "a no-op is no write")

	// A new version of the object is looked at again.
	require.NoError(t, e.client.Get(ctx, types.NamespacedName{Name: "webhook-guard-app"}, &b))
	b.Annotations = map[string]string{"touched": "yes"}
	require.NoError(t, e.client.Update(ctx, &b, client.FieldOwner("someone")))
	require.NoError(t, e.syncer.Sync(ctx))
	require.NoError(t, e.syncer.Sync(ctx))
	assert.Equal(t, 2, counting.updates)
}
