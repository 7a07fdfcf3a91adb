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

// watchConstructors start a watch or a cache of their own, beside the
// manager's.
var watchConstructors = regexp.MustCompile(`cache\.New\(|NewSharedInformerFactory|dynamicinformer\.New|NewSharedIndexInformer\(|NewInformer\(|NewIndexerInformer\(`)

// Test_clusterReaders holds the architecture page's table of how serve
// reads the cluster to the code: every package of the binary that starts
// a watch or cache of its own (not the manager's) has a row saying why,
// and every row's package exists. A new informer beside the manager's
// cache fails here until its reason is written down.
func Test_clusterReaders(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "docs", "contributing-architecture.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "How `serve` reads the cluster")
	require.True(t, ok, "docs/contributing-architecture.md has no table of how serve reads the cluster")
	section, _, _ = strings.Cut(section, "\n\n## ")
	// A row names its reader as `package.Identifier` or `dir/package`.
	named := map[string]bool{}
	code := regexp.MustCompile("`([a-z]+(?:/[a-z]+)*)(?:\\.[A-Za-z]+)?`")
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			pkg := m[1]
			if !strings.Contains(pkg, "/") {
				pkg = "webhook/" + pkg
			}
			_, err := os.Stat(filepath.Join(root, pkg))
			assert.NoError(t, err, "the readers table names %s, which is no package", m[0])
			named[pkg] = true
		}
	}
	require.NotEmpty(t, named, "the readers table names no package")
	for _, dir := range []string{"cmd", "webhook"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if watchConstructors.Match(src) {
				pkg, _ := filepath.Rel(root, filepath.Dir(path))
				assert.True(t, named[filepath.ToSlash(pkg)], "%s starts a watch or cache of its own: add a row to the readers table of docs/contributing-architecture.md saying why it is not the manager's cache", path)
			}
			return nil
		}))
	}
}
