package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testFuncs are the names of the test functions in the repository, every
// module included.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Test\w*)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(data, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// Test_docsNameExistingTests: a checklist or a guarantee that names the
// test which fails when a step is forgotten is only worth it while that
// test exists, so every test named alone in code spans (`Test_x`) must.
func Test_docsNameExistingTests(t *testing.T) {
	funcs := testFuncs(t)
	named := regexp.MustCompile("`(Test\\w*)`")
	for _, page := range linkedPages(t) {
		data, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		for _, m := range named.FindAllStringSubmatch(string(data), -1) {
			assert.True(t, funcs[m[1]], "%s names %s, which no test function is", page, m[1])
		}
	}
}
