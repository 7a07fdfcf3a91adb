// Package golden compares the commands' output with the golden files of
// their testdata; `go test PKG -update` rewrites them.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// Assert compares got with the golden file, or rewrites it with -update.
func Assert(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755)) //nolint:gosec // a testdata directory in the repository
		require.NoError(t, os.WriteFile(golden, got, 0o644))         //nolint:gosec // a golden file in the repository
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test with -update to create it")
	assert.Equal(t, string(want), string(got))
}

// Name is the golden file name of a test case's sentence.
func Name(name string) string {
	return strings.NewReplacer(" ", "_", ",", "", "'", "", "(", "", ")", "", "+", "and", ":", "").Replace(name) + ".golden"
}
