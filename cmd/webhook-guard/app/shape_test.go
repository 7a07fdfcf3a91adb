package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandFiles parses the production files of the commands' packages
// (cmd/webhook-guard/*, not internal/), keyed by path.
func commandFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "internal" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		files[path] = f
		return err
	})
	require.NoError(t, err)
	return files
}

// exprString is the source text of an expression or type, as gofmt prints it
// without spaces that do not matter here.
func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.ArrayType:
		return "[]" + exprString(e.Elt)
	case *ast.CallExpr:
		return exprString(e.Fun) + "(...)"
	}
	return "?"
}

// signature is a function type's parameter and result types, by name.
func signature(ft *ast.FuncType) (params, results []string) {
	for _, f := range ft.Params.List {
		for range max(1, len(f.Names)) {
			params = append(params, exprString(f.Type))
		}
	}
	if ft.Results != nil {
		for _, f := range ft.Results.List {
			results = append(results, exprString(f.Type))
		}
	}
	return params, results
}

// The shape every command has: Complete, Validate and Run with these
// signatures (cmdutil.Command), called by cmdutil.Runner.
var stepSignatures = map[string]string{
	"Complete": "([]string) error",
	"Validate": "() error",
	"Run":      "(context.Context) error",
}

func Test_commandsHaveOneShape(t *testing.T) {
	steps := map[string]map[string]string{} // receiver type -> method -> signature
	embedsStreams := map[string]bool{}
	for path, f := range commandFiles(t) {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				checkFunc(t, path, d, steps)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						embedsStreams[ts.Name.Name] = embeds(ts, "genericiooptions.IOStreams")
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			checkCommandLiteral(t, path, n)
			return true
		})
	}
	require.NotEmpty(t, steps, "no command options found")
	for typ, methods := range steps {
		for name, want := range stepSignatures {
			assert.Equal(t, want, methods[name], "%s.%s: every command's options have %s%s", typ, name, name, want)
		}
		assert.True(t, embedsStreams[typ], "%s does not embed genericiooptions.IOStreams: a command prints to its streams", typ)
	}
}

// checkFunc holds NewCmd functions to (ctx, streams, ...) *cobra.Command
// and records the steps' signatures.
func checkFunc(t *testing.T, path string, d *ast.FuncDecl, steps map[string]map[string]string) {
	t.Helper()
	params, results := signature(d.Type)
	if d.Recv == nil {
		if strings.HasPrefix(d.Name.Name, "NewCmd") {
			ok := len(params) >= 2 && params[0] == "context.Context" && params[1] == "genericiooptions.IOStreams"
			assert.True(t, ok, "%s: %s takes (ctx context.Context, streams genericiooptions.IOStreams, ...), got %v", path, d.Name.Name, params)
			assert.Equal(t, []string{"*cobra.Command"}, results, "%s: %s returns *cobra.Command", path, d.Name.Name)
		}
		root := d.Name.Name == "NewCommand" && filepath.Base(filepath.Dir(path)) == "app" // the root, for callers that list the commands
		assert.False(t, !root && strings.HasPrefix(d.Name.Name, "New") && strings.HasSuffix(d.Name.Name, "Command"),
			"%s: %s: a command's constructor is NewCmd<Name>", path, d.Name.Name)
		return
	}
	if _, isStep := stepSignatures[d.Name.Name]; !isStep {
		return
	}
	typ := strings.TrimPrefix(exprString(d.Recv.List[0].Type), "*")
	if steps[typ] == nil {
		steps[typ] = map[string]string{}
	}
	steps[typ][d.Name.Name] = "(" + strings.Join(params, ", ") + ") " + strings.Join(results, ", ")
}

// checkCommandLiteral holds every cobra.Command literal to an Example and,
// when it runs anything, to cmdutil.Runner.
func checkCommandLiteral(t *testing.T, path string, n ast.Node) {
	t.Helper()
	lit, ok := n.(*ast.CompositeLit)
	if !ok || lit.Type == nil || exprString(lit.Type) != "cobra.Command" {
		return
	}
	fields := map[string]ast.Expr{}
	for _, e := range lit.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			fields[exprString(kv.Key)] = kv.Value
		}
	}
	use, _ := fields["Use"].(*ast.BasicLit)
	name := path
	if use != nil {
		name, _ = strconv.Unquote(use.Value)
	}
	if name == "webhook-guard" {
		return // the root: it runs nothing and its examples are its commands'
	}
	assert.Contains(t, fields, "Example", "%s: command %q has no Example", path, name)
	for _, key := range []string{"Run", "PreRunE", "PostRunE"} {
		assert.NotContains(t, fields, key, "%s: command %q sets %s: the steps run in cmdutil.Runner", path, name, key)
	}
	if runE, ok := fields["RunE"]; ok {
		assert.Equal(t, "cmdutil.Runner(...)", exprString(runE), "%s: command %q: RunE is cmdutil.Runner(ctx, o)", path, name)
	}
}

func embeds(ts *ast.TypeSpec, typ string) bool {
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return false
	}
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 && exprString(f.Type) == typ {
			return true
		}
	}
	return false
}

// Test_workOutsideCobra: what the commands do (cmd/webhook-guard/internal,
// cmdutil aside) is callable without cobra, and only cmdutil handles
// signals (Main, once for every command).
func Test_workOutsideCobra(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		inCmdutil := strings.Contains(filepath.ToSlash(path), "/internal/cmdutil/")
		work := strings.Contains(filepath.ToSlash(path), "/internal/") && !inCmdutil
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			assert.False(t, work && strings.HasPrefix(p, "github.com/spf13/"), "%s imports %s: the work of a command does not know its flags", path, p)
			assert.False(t, !inCmdutil && p == "os/signal", "%s imports os/signal: app.Main handles the signals for every command", path)
		}
		return nil
	})
	require.NoError(t, err)
}
