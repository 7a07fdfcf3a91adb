package suites

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notInMakeTest are the modules with tests that `make test` does not run,
// and the target that does.
var notInMakeTest = map[string]string{
	"e2e/perf": "make bench and make loadtest",
}

// modules are the directories below root holding a go.mod, but for the
// modules that only pin tools (e2e/tools/*), with whether they hold tests.
func modules(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if slices.Contains([]string{".git", "bin", ".cache", "e2e/tools"}, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "go.mod" && rel != "go.mod" {
			out[filepath.ToSlash(filepath.Dir(rel))] = false
		}
		return nil
	})
	require.NoError(t, err)
	for m := range out {
		err := filepath.WalkDir(filepath.Join(root, m), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != filepath.Join(root, m) {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own
				}
			}
			if strings.HasSuffix(d.Name(), "_test.go") {
				out[m] = true
			}
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// recipe is the body of target in the Makefile.
func recipe(makefile, target string) string {
	var b strings.Builder
	in := false
	for line := range strings.SplitSeq(makefile, "\n") {
		switch {
		case strings.HasPrefix(line, target+":"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			b.WriteString(line + "\n")
		case in:
			return b.String()
		}
	}
	return b.String()
}

// Test_makeTestRunsEveryModule checks that `make test` runs the root
// module and every nested module with tests, and that `make lint` lints
// every nested module (NESTED_MODULES).
func Test_makeTestRunsEveryModule(t *testing.T) {
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	makefile := string(raw)
	test := recipe(makefile, "test")
	assert.Contains(t, test, "go test -race -count=1 ./...\n", "make test runs the root module")

	nested := regexp.MustCompile(`(?m)^NESTED_MODULES := (.*)$`).FindStringSubmatch(makefile)
	require.NotNil(t, nested, "the Makefile sets NESTED_MODULES")
	listed := strings.Fields(nested[1])

	found := modules(t, root)
	var names []string
	for m, hasTests := range found {
		names = append(names, m)
		assert.Contains(t, listed, m, "module %s is not in NESTED_MODULES: make lint does not lint it", m)
		runs := strings.Contains(test, "go -C "+m+" test ")
		if target, ok := notInMakeTest[m]; ok {
			assert.False(t, runs, "module %s is run by %s; drop it from notInMakeTest", m, target)
			continue
		}
		if hasTests {
			assert.True(t, runs, "module %s has tests that make test does not run (go -C %s test ...)", m, m)
		}
	}
	for _, m := range listed {
		assert.True(t, slices.Contains(names, m), "NESTED_MODULES names %s, which holds no go.mod", m)
	}
}

// notInGoWork are the modules go.work leaves out, and why.
var notInGoWork = map[string]string{
	"policy/gitops/tooltypes": "Argo CD needs k8s.io v0.34, the others v0.37, and a workspace takes one",
	"e2e/writers/istio":       "Istio pins k8s.io v0.36, the others v0.37, and a workspace takes one",
	"e2e/writers/knative":     "knative.dev/pkg pins k8s.io v0.35, the others v0.37, and a workspace takes one",
	"e2e/writers/kyverno":     "Kyverno v1.19 pins k8s.io v0.36, the others v0.37, and a workspace takes one",
}

// Test_goWorkUsesEveryModule checks that go.work uses every module of the
// repository, the tool pins included, so that an editor at the root
// resolves them all and `make lint`'s workspace vet reaches them.
func Test_goWorkUsesEveryModule(t *testing.T) {
	root := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	block := regexp.MustCompile(`(?s)\nuse \((.*?)\)`).FindStringSubmatch(string(raw))
	require.NotNil(t, block, "go.work has a use block")
	var used []string
	for f := range strings.FieldsSeq(block[1]) {
		used = append(used, strings.TrimPrefix(f, "./"))
	}
	var want []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && slices.Contains([]string{".git", "bin", ".cache"}, d.Name()) {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if _, out := notInGoWork[filepath.ToSlash(rel)]; !out {
				want = append(want, filepath.ToSlash(rel))
			}
			return err
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(used)
	slices.Sort(want)
	assert.Equal(t, want, used, "go.work's use block is not the repository's modules")
}
