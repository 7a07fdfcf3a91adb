package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// declaredRules reads every constant of type Rule declared in this
// package's source, so that a new rule cannot be added without its table
// entry.
func declaredRules(t *testing.T) map[Rule]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	out := map[Rule]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Rule" {
					continue
				}
				for i, n := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					require.True(t, ok, "%s: %s is not a string literal", name, n.Name)
					value, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[Rule(value)] = n.Name
				}
			}
		}
	}
	require.NotEmpty(t, out)
	return out
}

// Test_ruleTable: every Rule constant has exactly one entry, with its own
// priority (from 1), a summary and, unless it is RuleNone, a review
// suggestion; the table has nothing else.
func Test_ruleTable(t *testing.T) {
	declared := declaredRules(t)
	priorities := map[int]Rule{}
	for rule, constant := range declared {
		info, ok := ruleTable[rule]
		if !assert.True(t, ok, "%s (%q) has no entry in ruleTable (rules.go)", constant, rule) {
			continue
		}
		assert.GreaterOrEqual(t, info.Priority, 1, "%s: priorities start at 1", constant)
		if other, dup := priorities[info.Priority]; dup {
			t.Errorf("%s and %s share priority %d", other, rule, info.Priority)
		}
		priorities[info.Priority] = rule
		assert.NotEmpty(t, info.Summary, "%s has no summary", constant)
		assert.NotEmpty(t, info.Category, "%s has no report category", constant)
		// review lists every recorded finding with its suggestion; only
		// RuleNone, which nothing breaks, is never one.
		if rule == RuleNone {
			assert.Nil(t, info.Suggest, "%s breaks nothing: review has nothing to suggest", constant)
		} else {
			assert.NotNil(t, info.Suggest, "%s has no Suggest: webhook-guard review would print no fix for its findings", constant)
		}
	}
	for rule := range ruleTable {
		assert.Contains(t, declared, rule, "ruleTable has an entry for %q, which is no Rule constant", rule)
	}
	got := Rules()
	assert.Len(t, got, len(declared))
	assert.True(t, sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Info().Priority < got[j].Info().Priority }), "Rules is in priority order")
}

// Test_Decision_ruleByPriority: a decision that breaks several rules is
// counted under the one first in the table.
func Test_Decision_ruleByPriority(t *testing.T) {
	tests := map[string]struct {
		violations []Rule
		exp        Rule
	}{
		"if not-owner and ca-mismatch are broken, count not-owner": {
			violations: []Rule{RuleCAMismatch, RuleNotOwner}, exp: RuleNotOwner,
		},
		"if ca-mismatch and ca-unavailable are broken, count ca-unavailable": {
			violations: []Rule{RuleCAMismatch, RuleCAUnavailable}, exp: RuleCAUnavailable,
		},
		"if nothing is broken, count none": {exp: RuleNone},
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			d := Decision{}
			for _, r := range test.violations {
				d.Violations = append(d.Violations, Violation{Rule: r})
			}
			d.finish(ModeEnforce, false)
			assert.Equal(t, test.exp, d.Rule)
		})
	}
}
