package casource

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_sourceOfKind_everyKind: the resolver has a case for every kind of
// guardapi.CASourceKinds. A kind added to policy without its case here gets
// errUnknownKind and fails this test.
func Test_sourceOfKind_everyKind(t *testing.T) {
	rd := fake.NewClientBuilder().WithScheme(newScheme(t)).Build()
	r := New(rd, Options{})
	for _, k := range guardapi.CASourceKinds() {
		t.Run(string(k), func(t *testing.T) {
			owner := &guardapi.Owner{Name: "example", CA: k.Example()}
			// An injected source is named by the configuration's annotation.
			req := Request{Owner: owner, ClusterResourceNamespace: "cert-manager", Annotations: map[string]string{AnnotationInjectCAFrom: "example-system/example-serving-cert"}}
			src, err := sourceOf(req)
			require.NotErrorIs(t, err, errUnknownKind)
			require.NoError(t, err)
			assert.NotEmpty(t, src.key, "a source needs a description: it keys the cache and names the source in messages and metrics")

			// Resolving against an empty cluster fails to find the object
			// (or, for pem, succeeds); it never fails for want of a case.
			res := r.Resolve(t.Context(), req, true)
			assert.NotErrorIs(t, res.Err, errUnknownKind)
			assert.Equal(t, src.key, res.Source)
		})
	}
}

// Test_readers_onlyKinds: the registry reads the kinds of the API package
// and nothing else.
func Test_readers_onlyKinds(t *testing.T) {
	for k := range readers {
		assert.Contains(t, guardapi.CASourceKinds(), k)
	}
	assert.Len(t, readers, len(guardapi.CASourceKinds()))
}

func Test_sourceOfKind_unknown(t *testing.T) {
	_, err := sourceOfKind("unknown", Request{Owner: &guardapi.Owner{Name: "example"}})
	assert.True(t, errors.Is(err, errUnknownKind), "%v", err)
	assert.ErrorContains(t, err, "unknown")
}
