package charts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/webhook-guard/webhook-guard/hack/valuesdoc/valuesdoc"
)

// Test_valuesReferenceIsCurrent: the README's values reference is what
// `go run ./hack/valuesdoc` generates from values.yaml now.
func Test_valuesReferenceIsCurrent(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	require.NoError(t, err)
	want, err := valuesdoc.Update(readme, values)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(readme), "charts/webhook-guard/README.md's values reference is stale: run go run ./hack/valuesdoc")
}
