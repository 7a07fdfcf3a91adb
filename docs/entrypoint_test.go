package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callSite is one call of a method named name with args arguments.
type callSite struct {
	file string
	name string
	args int
}

// callsOutsidePolicy lists, in the root module's non-test Go files outside
// policy/, every call of a method named one of names.
func callsOutsidePolicy(t *testing.T, names ...string) []callSite {
	t.Helper()
	var out []callSite
	fset := token.NewFileSet()
	for _, root := range []string{"../cmd", "../webhook", "../internal"} {
		if _, err := os.Stat(root); os.IsNotExist(err) {
			continue
		}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
					for _, name := range names {
						if sel.Sel.Name == name {
							out = append(out, callSite{file: filepath.ToSlash(strings.TrimPrefix(path, "../")), name: name, args: len(call.Args)})
						}
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// Test_oneDecisionEntryPoint: admission (serve and check share
// webhook.Handler) and the observer reach the decision through
// policy.Mappings.Evaluate, each handing it its own CA lookup; nothing
// outside policy calls the rules alone (Mappings.Decide, one argument:
// the input with its CA already filled in), so no caller drives the
// decision step by step.
func Test_oneDecisionEntryPoint(t *testing.T) {
	calls := callsOutsidePolicy(t, "Evaluate", "Decide", "Review")
	evaluates := map[string]bool{}
	reviews := map[string]bool{}
	for _, c := range calls {
		switch {
		case c.name == "Evaluate" && c.args == 2:
			evaluates[c.file] = true
		case c.name == "Decide" && c.args == 1:
			t.Errorf("%s calls Decide(input): decide through policy.Mappings.Evaluate", c.file)
		case c.name == "Review":
			reviews[c.file] = true
		}
	}
	assert.Equal(t, map[string]bool{"webhook/handler.go": true, "webhook/observe/decider.go": true}, evaluates,
		"the handler (serve, check) and the observer call Evaluate, nothing else does")
	checkReviews := false
	for f := range reviews {
		checkReviews = checkReviews || strings.HasPrefix(f, "cmd/webhook-guard/check/")
	}
	assert.True(t, checkReviews, "check decides through webhook.Handler.Review, the path serve answers on: %v", reviews)
}
