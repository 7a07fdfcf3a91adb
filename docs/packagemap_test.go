package docs

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/webhook-guard/webhook-guard"

// packageRule is one row of the package map: the packages it covers and
// the packages of this module they may import.
type packageRule struct {
	pattern string
	allowed []string
}

// matches reports whether pkg (module-relative) is pattern, or under it
// when pattern ends in /... .
func matches(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// packageMap reads the table under "## Package map" in
// docs/contributing-architecture.md.
func packageMap(t *testing.T) []packageRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs", "contributing-architecture.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "## Package map\n")
	require.True(t, ok, "docs/contributing-architecture.md has no Package map section")
	section, _, _ = strings.Cut(section, "\n## ")
	code := regexp.MustCompile("`([^`]+)`")
	var rules []packageRule
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		r := packageRule{pattern: strings.Trim(strings.TrimSpace(cells[1]), "`")}
		for _, m := range code.FindAllStringSubmatch(cells[3], -1) {
			r.allowed = append(r.allowed, m[1])
		}
		rules = append(rules, r)
	}
	require.NotEmpty(t, rules, "the Package map table has no rows")
	return rules
}

// rule is the most specific row covering pkg: an exact row before a /... one.
func rule(rules []packageRule, pkg string) (packageRule, bool) {
	for _, r := range rules {
		if r.pattern == pkg {
			return r, true
		}
	}
	for _, r := range rules {
		if matches(r.pattern, pkg) {
			return r, true
		}
	}
	return packageRule{}, false
}

// listedPackage is what go list -json says of a package.
type listedPackage struct {
	ImportPath string   `json:"ImportPath"`
	Name       string   `json:"Name"`
	Imports    []string `json:"Imports"`
}

// rootPackages lists the root module's packages but docs (this test) and
// hack's commands (development tools, free to import anything); the
// libraries under hack/ that tests share have rows like any other package.
func rootPackages(t *testing.T) []listedPackage {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-json=ImportPath,Name,Imports", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list ./...")
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPackage
		require.NoError(t, dec.Decode(&p))
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		if rel == "docs" || (matches("hack/...", rel) && p.Name == "main") {
			continue
		}
		p.ImportPath = rel
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// impure are what a policy package may not import: clients, files, sockets,
// HTTP (a decision's HTTP status is webhook's).
var impure = []string{"os", "io/fs", "net/...", "k8s.io/client-go/...", "sigs.k8s.io/controller-runtime/..."}

// pureAfterAll are the packages under impure ones that only compute:
// net/url parses a webhook URL (policy/static checks the one it writes
// into a kubeconfig), it opens nothing.
var pureAfterAll = []string{"net/url"}

func Test_packageMap(t *testing.T) {
	rules := packageMap(t)
	for _, p := range rootPackages(t) {
		r, ok := rule(rules, p.ImportPath)
		if !ok {
			t.Errorf("%s has no row in docs/contributing-architecture.md's Package map", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if rel, ours := strings.CutPrefix(imp, modulePath+"/"); ours {
				if !slices.ContainsFunc(r.allowed, func(a string) bool { return matches(a, rel) }) {
					t.Errorf("%s imports %s, which its Package map row (%s) does not allow", p.ImportPath, rel, r.pattern)
				}
				continue
			}
			if matches("policy/...", p.ImportPath) && slices.ContainsFunc(impure, func(i string) bool { return matches(i, imp) }) &&
				!slices.Contains(pureAfterAll, imp) {
				t.Errorf("%s imports %s: policy/... is pure (no clients, files or sockets)", p.ImportPath, imp)
			}
		}
	}
}

// topLevel is the repository's top level, as CONTRIBUTING.md's Layout
// promises it: a new directory there is a decision to make in both places.
var topLevel = []string{"charts", "cmd", "config", "docs", "e2e", "hack", "policy", "webhook"}

func Test_topLevel(t *testing.T) {
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		// bin/ is built (and ignored by git); dot directories are tooling.
		if e.IsDir() && e.Name() != "bin" && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	require.Equal(t, topLevel, dirs, "the top level is not CONTRIBUTING.md's Layout")
}
