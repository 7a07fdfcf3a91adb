package policy

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
)

// Test_everyGuardedKind walks guardapi.Kinds: a mapping that names one
// object of each kind claims it (Load indexes every kind's names), a label
// selector claims one only where a mapping owns the whole object, a
// foreign CA the owner's controller writes is denied at the path where the
// kind's row says the caBundle is, and a write by someone else that
// leaves the trust alone is the mapping's to decide only where it owns the
// whole object. A kind added to guardapi.Kinds that the decision does not
// handle fails here.
func Test_everyGuardedKind(t *testing.T) {
	f := testFixtures(t)
	doc, err := json.Marshal(guardapi.GuardConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: guardapi.APIVersion, Kind: guardapi.Kind}, DefaultMode: guardapi.ModeEnforce,
		Owners: []guardapi.Owner{
			{Name: "all", Match: guardapi.ExampleMatch(), Writers: guardapi.Subjects{ServiceAccounts: []string{"all-system/controller"}}, CA: guardapi.CASource{PEM: string(f.Inline.PEM)}},
			{Name: "labelled", Match: guardapi.Match{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
				Writers: guardapi.Subjects{ServiceAccounts: []string{"team-a/controller"}}, CA: guardapi.CASource{Secret: &guardapi.KeyRef{Namespace: "team-a", Name: "ca"}}},
		},
	})
	require.NoError(t, err)
	cfg := mustLoad(t, string(doc))
	owner := User{Username: sa("all-system", "controller")}
	installer := User{Username: sa("argocd", "argocd-application-controller")}

	for _, k := range guardapi.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			kind := GuardedKind(k.Kind)
			if m := cfg.Match(kind, k.ExampleName()); assert.NotNil(t, m.Owner, "the mapping that names it does not claim it") {
				assert.Equal(t, "all", m.Owner.Name)
			}
			m := cfg.Match(kind, "other.example.com", map[string]string{"team": "a"})
			assert.Equal(t, !k.OwnsTrustOnly, m.Owner != nil, "a label selector claims it")

			name, bundleField := "example.webhook-guard.io", strings.Join(k.Entries.CABundlePath(), ".")
			if k.Entries.One() {
				name = k.Entries.Name
			} else {
				bundleField = k.Entries.List + "[0]." + bundleField
			}
			write := func(user User, bundle []byte) *Input {
				return &Input{Operation: OperationUpdate, Kind: kind, Name: k.ExampleName(), User: user,
					OldEntries: []Entry{{Name: name, CABundle: f.Inline.PEM}}, Entries: []Entry{{Name: name, CABundle: bundle}}}
			}

			d := cfg.Decide(write(owner, f.Foreign.PEM))
			assert.Equal(t, RuleCAMismatch, d.Rule)
			if assert.NotEmpty(t, d.Violations) {
				assert.Equal(t, bundleField, d.Violations[0].Field)
			}
			d = cfg.Decide(write(installer, f.Inline.PEM))
			if k.OwnsTrustOnly {
				assert.Equal(t, RuleNone, d.Rule, "a write that leaves the trust alone")
			} else {
				assert.Equal(t, RuleNotOwner, d.Rule, "a write by a subject that is no writer")
			}
		})
	}
}

// Test_everyRowIsAGuardedKindConstant: every row of guardapi.Kinds is the
// value of a GuardedKind constant of this package, so that the exhaustive
// linter, which knows a type's values by its constants, reports a switch
// or an //exhaustive:enforce map over GuardedKind that misses the kind.
// The constants are read from the package's source: a value the linter
// does not see is none the test may take from elsewhere.
func Test_everyRowIsAGuardedKindConstant(t *testing.T) {
	apiConsts := stringConstants(t, "api/v1alpha1", "")
	values := map[string]string{}
	for name, v := range stringConstants(t, ".", "GuardedKind") {
		if api, ok := strings.CutPrefix(v, "guardapi."); ok {
			v = apiConsts[api]
		}
		values[v] = name
	}
	for _, k := range guardapi.Kinds {
		assert.Contains(t, values, k.Kind, "no GuardedKind constant is %q", k.Kind)
	}
}

// stringConstants are the constants declared in the non-test files of
// dir, of the named type ("": untyped), by name: a string literal's value,
// or an imported constant as pkg.Name.
func stringConstants(t *testing.T, dir, typ string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if named, _ := vs.Type.(*ast.Ident); (typ == "" && vs.Type != nil) || (typ != "" && (named == nil || named.Name != typ)) {
					continue
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					switch v := vs.Values[i].(type) {
					case *ast.BasicLit:
						out[name.Name], _ = strconv.Unquote(v.Value)
					case *ast.SelectorExpr:
						if pkg, ok := v.X.(*ast.Ident); ok {
							out[name.Name] = pkg.Name + "." + v.Sel.Name
						}
					}
				}
			}
		}
	}
	return out
}
