package celfmt

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func Test_Format(t *testing.T) {
	long := strings.Repeat("x", 60)
	tests := map[string]struct{ expr, want string }{
		"if it fits, one line": {
			expr: `a && b || c`,
			want: `a && b || c`,
		},
		"if a chain is too long, one operand per line, a looser operand in parentheses": {
			expr: `variables.` + long + ` && (variables.` + long + ` || c) && d`,
			want: "variables." + long + "\n&& (variables." + long + " || c)\n&& d",
		},
		"if a conditional is too long, its branches on their own lines": {
			expr: `has(object.` + long + `) ? object.` + long + ` : ""`,
			want: "has(object." + long + ")\n  ? object." + long + "\n  : \"\"",
		},
		"if a macro is too long, its body under it": {
			expr: `object.webhooks.all(w, w.` + long + ` == "a" && w.` + long + ` == "b")`,
			want: "object.webhooks.all(w,\n  w." + long + " == \"a\"\n  && w." + long + " == \"b\")",
		},
		"if a negation is too long, its operand in parentheses": {
			expr: `!(a.` + long + ` && b.` + long + `)`,
			want: "!(a." + long + "\n  && b." + long + ")",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Format(tt.expr, 0)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assertSame(t, tt.expr, got)
		})
	}
	t.Run("if the expression does not parse, an error names it", func(t *testing.T) {
		_, err := Format(`a &&`, 0)
		require.ErrorContains(t, err, "celfmt: ")
	})
}

// assertSame holds a layout to the expression it lays out: both parse to
// one expression.
func assertSame(t *testing.T, expr, laidOut string) {
	t.Helper()
	want, err := Inline(expr)
	require.NoError(t, err)
	got, err := Inline(laidOut)
	require.NoError(t, err, laidOut)
	assert.Equal(t, want, got, "the layout parses to another expression:\n%s", laidOut)
}

func Test_ClosedSubExpressions(t *testing.T) {
	subs, err := ClosedSubExpressions(`object.webhooks.all(w, w.name == variables.name) && request.operation == "UPDATE"`, 20)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{
		`object.webhooks.all(w, w.name == variables.name)`,
		`request.operation == "UPDATE"`,
		`object.webhooks.all(w, w.name == variables.name) && request.operation == "UPDATE"`,
	}, subs, "w.name == variables.name reads the entry the macro walks: no variable could hold it")
	_, err = ClosedSubExpressions(`a &&`, 1)
	require.ErrorContains(t, err, "celfmt: ")
}
