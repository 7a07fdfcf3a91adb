package charts

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A query's structure, read far enough to check the labels it names:
// aggregations (by), vector matching (on, group_left, group_right) and
// label_replace. The chart's queries keep one binary operator per
// parenthesised level where they match vectors, which is what operands
// relies on.
var (
	aggregationBy = regexp.MustCompile(`\b(?:sum|min|max|avg|count|topk|bottomk|group)\s+by\s*\(([^)]*)\)\s*\(`)
	vectorMatch   = regexp.MustCompile(`\b(on|ignoring)\s*\(([^)]*)\)(?:\s*(group_left|group_right)\s*\(([^)]*)\))?`)
	labelReplace  = regexp.MustCompile(`\blabel_replace\s*\(`)
	replaceArgs   = regexp.MustCompile(`^\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\)`)
	leadingAgg    = regexp.MustCompile(`^(?:sum|min|max|avg|count|group)\s+by\s*\(([^)]*)\)\s*\(`)
	trailingOp    = regexp.MustCompile(`(?:[-+*/%^<>=!]+|\b(?:and|or|unless)\b)\s*$`)
	word          = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// checkQueryLabels checks the labels a query's structure names against
// known (series name -> label names, of every source):
//   - an aggregation groups by labels of the series it aggregates (or made
//     by a label_replace inside it);
//   - a vector match's on (...) labels are labels of both operands, its
//     group_left (...) labels of the right one (group_right: the left);
//   - label_replace copies a label the series it reads has.
//
// A misspelled label fails nowhere in Prometheus: the aggregation yields
// empty groups, the join matches nothing, and the alert or panel stays
// silent.
func checkQueryLabels(errorf func(format string, args ...any), what, expr string, known map[string][]string) {
	for _, m := range aggregationBy.FindAllStringSubmatchIndex(expr, -1) {
		inner := expr[m[1]:closing(expr, m[1]-1)]
		requireLabels(errorf, what, "groups by", splitLabels(expr[m[2]:m[3]]), labelsOf(inner, known), inner)
	}
	for _, m := range vectorMatch.FindAllStringSubmatchIndex(expr, -1) {
		start, end := enclosing(expr, m[0])
		left := trailingOp.ReplaceAllString(strings.TrimSpace(expr[start:m[0]]), "")
		right := expr[m[1]:end]
		leftLabels, rightLabels := labelsOf(left, known), labelsOf(right, known)
		if expr[m[2]:m[3]] == "on" {
			requireLabels(errorf, what, "matches on", splitLabels(expr[m[4]:m[5]]), leftLabels, left)
			requireLabels(errorf, what, "matches on", splitLabels(expr[m[4]:m[5]]), rightLabels, right)
		}
		switch {
		case m[6] < 0:
		case expr[m[6]:m[7]] == "group_left":
			requireLabels(errorf, what, "copies (group_left)", splitLabels(expr[m[8]:m[9]]), rightLabels, right)
		default:
			requireLabels(errorf, what, "copies (group_right)", splitLabels(expr[m[8]:m[9]]), leftLabels, left)
		}
	}
	for _, r := range labelReplaces(expr) {
		requireLabels(errorf, what, "label_replace reads", []string{r.src}, labelsOf(r.from, known), r.from)
	}
}

func requireLabels(errorf func(format string, args ...any), what, does string, want, have []string, operand string) {
	for _, l := range want {
		if !slices.Contains(have, l) {
			errorf("%s %s %q, which %q does not have (it has %v)", what, does, l, strings.TrimSpace(operand), have)
		}
	}
}

// labelsOf are the labels the result of expr can have: an aggregation's
// by (...) labels, else those of every known series expr reads and every
// label a label_replace in it makes.
func labelsOf(expr string, known map[string][]string) []string {
	expr = strings.TrimSpace(expr)
	for strings.HasPrefix(expr, "(") && closing(expr, 0) == len(expr)-1 {
		expr = strings.TrimSpace(expr[1 : len(expr)-1])
	}
	if m := leadingAgg.FindStringSubmatch(expr); m != nil {
		return splitLabels(m[1])
	}
	var out []string
	for _, w := range word.FindAllString(promqlString.ReplaceAllString(expr, `""`), -1) {
		out = append(out, known[w]...)
	}
	for _, r := range labelReplaces(expr) {
		out = append(out, r.dst)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// replace is one label_replace(from, dst, replacement, src, regex).
type replace struct{ from, dst, replacement, src, regex string }

func labelReplaces(expr string) []replace {
	var out []replace
	for _, m := range labelReplace.FindAllStringIndex(expr, -1) {
		depth, comma := 0, -1
		for i := m[1]; i < len(expr) && comma < 0; i++ {
			switch expr[i] {
			case '(', '{', '[':
				depth++
			case ')', '}', ']':
				depth--
			case ',':
				if depth == 0 {
					comma = i
				}
			}
		}
		if comma < 0 {
			continue
		}
		if a := replaceArgs.FindStringSubmatch(expr[comma+1:]); a != nil {
			out = append(out, replace{from: expr[m[1]:comma], dst: a[1], replacement: a[2], src: a[3], regex: a[4]})
		}
	}
	return out
}

// closing is the index of the parenthesis closing the one at open
// (len(expr) if none).
func closing(expr string, open int) int {
	depth := 0
	for i := open; i < len(expr); i++ {
		switch expr[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(expr)
}

// enclosing is the span of the innermost parentheses around pos (the
// whole expression if none), without them.
func enclosing(expr string, pos int) (int, int) {
	depth, start := 0, 0
	for i := pos - 1; i >= 0; i-- {
		if expr[i] == ')' {
			depth++
		} else if expr[i] == '(' {
			if depth == 0 {
				start = i + 1
				break
			}
			depth--
		}
	}
	if start == 0 {
		return 0, len(expr)
	}
	return start, closing(expr, start-1)
}

func splitLabels(list string) []string {
	var out []string
	for l := range strings.SplitSeq(list, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func Test_checkQueryLabels(t *testing.T) {
	known := map[string][]string{"a": {"name", "type", "le"}, "info": {"webhook", "kind", "mapping"}}
	for expr, want := range map[string]int{
		`sum by (name) (rate(a[5m]))`:    0,
		`sum by (mapping) (rate(a[5m]))`: 1,
		`sum by (name, mapping) (a * on (name) group_left (mapping) label_replace(info, "name", "$1", "webhook", "(.*)"))`:                                                         0,
		`sum by (name) (a * on (name, kind) group_left (mapping) label_replace(info, "name", "$1", "webhook", "(.*)"))`:                                                            1,
		`a * on (name) group_left (owner) max by (name, mapping) (label_replace(info, "name", "$1", "webhook", "(.*)"))`:                                                           1,
		`a * on (name) group_left (mapping) label_replace(info, "name", "$1", "hook", "(.*)")`:                                                                                     1,
		`(max by (name) (a) == 0) * on (name) group_left (mapping) max by (name, mapping) (label_replace(info, "name", "$1", "webhook", "(.*)"))`:                                  0,
		`histogram_quantile(0.99, sum by (le, name) (rate(a[5m])) * on (name) group_left (mapping) max by (name, mapping) (label_replace(info, "name", "$1", "webhook", "(.*)")))`: 0,
	} {
		var errs []string
		checkQueryLabels(func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }, "query", expr, known)
		if len(errs) != want {
			t.Errorf("%s: %d errors %q, want %d", expr, len(errs), errs, want)
		}
	}
}
