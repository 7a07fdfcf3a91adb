package webhook

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func Test_NewScheme(t *testing.T) {
	s, err := NewScheme()
	require.NoError(t, err)
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Secret"},
		{Version: "v1", Kind: "ConfigMap"},
		{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"},
		{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"},
		{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"},
	} {
		assert.True(t, s.Recognizes(gvk), "the scheme knows %s", gvk)
	}
}
