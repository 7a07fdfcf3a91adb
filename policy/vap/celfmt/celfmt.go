// Package celfmt lays out a CEL expression for a reader: one operand of
// && and || per line, a conditional's branches on their own lines, and a
// macro's body (all, exists, map, filter) indented under its call, each
// only where the expression does not fit the width on one line.
//
// The generated policies keep their expressions on one line: kube-apiserver
// limits an expression's length, and its cost does not depend on layout.
// `render policy --explain` and the generator's golden tests print them
// through Format instead, so that a reviewer can follow them.
package celfmt

import (
	"fmt"
	"math"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/parser"
)

// Width is the column Format keeps lines within where it can (a literal
// longer than that stays whole).
const Width = 100

// env parses what the generator writes: kube-apiserver's macros, two-
// variable comprehensions and optional field selection included. It
// declares nothing: Format only parses.
var env = func() *cel.Env {
	e, err := cel.NewEnv(cel.EnableMacroCallTracking(), ext.TwoVarComprehensions(), cel.OptionalTypes())
	if err != nil {
		panic(fmt.Sprintf("celfmt: the parse environment: %v", err))
	}
	return e
}()

// Format lays out expr within Width columns, each continuation line
// indented by indent plus its depth. The result parses to the same
// expression as expr (Test_Format_roundTrip).
func Format(expr string, indent int) (string, error) {
	p, e, err := parse(expr)
	if err != nil {
		return "", err
	}
	return p.node(e, indent)
}

// Inline is expr on one line, as the unparser writes it: the form the
// round trip compares.
func Inline(expr string) (string, error) {
	p, e, err := parse(expr)
	if err != nil {
		return "", err
	}
	return p.inline(e)
}

// parse parses expr, keeping its macro calls for the printer.
func parse(expr string) (printer, ast.Expr, error) {
	a, iss := env.Parse(expr)
	if iss.Err() != nil {
		return printer{}, nil, fmt.Errorf("celfmt: %w", iss.Err())
	}
	native := a.NativeRep()
	return printer{info: native.SourceInfo()}, native.Expr(), nil
}

type printer struct{ info *ast.SourceInfo }

func (p printer) inline(e ast.Expr) (string, error) {
	return parser.Unparse(e, p.info, parser.WrapOnColumn(math.MaxInt32))
}

// node lays out e starting at column indent.
func (p printer) node(e ast.Expr, indent int) (string, error) {
	s, err := p.inline(e)
	if err != nil || indent+len(s) <= Width {
		return s, err
	}
	if call, ok := p.info.GetMacroCall(e.ID()); ok {
		return p.macro(call, indent)
	}
	if e.Kind() != ast.CallKind {
		return s, nil
	}
	c := e.AsCall()
	switch c.FunctionName() {
	case operators.LogicalAnd, operators.LogicalOr:
		return p.chain(c.FunctionName(), e, indent)
	case operators.Conditional:
		return p.conditional(c.Args(), indent)
	case operators.LogicalNot:
		inner, err := p.node(c.Args()[0], indent+2)
		return "!(" + inner + ")", err
	}
	if sym, ok := operators.FindReverseBinaryOperator(c.FunctionName()); ok && len(c.Args()) == 2 {
		return p.binary(sym, c.FunctionName(), c.Args(), indent)
	}
	return s, nil
}

// binary lays out a comparison or arithmetic with its right operand on
// the next line.
func (p printer) binary(sym, op string, args []ast.Expr, indent int) (string, error) {
	l, err := p.operand(args[0], op, indent)
	if err != nil {
		return "", err
	}
	r, err := p.operand(args[1], op, indent+2+len(sym)+1)
	if err != nil {
		return "", err
	}
	return l + "\n" + pad(indent+2) + sym + " " + r, nil
}

// lastColumn is the column where s ends when it starts at column indent.
func lastColumn(s string, indent int) int {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return len(s) - i - 1
	}
	return indent + len(s)
}

// macro lays out a macro call: its target and leading arguments inline,
// its last argument (the body) indented on the next line.
func (p printer) macro(call ast.Expr, indent int) (string, error) {
	c := call.AsCall()
	var head strings.Builder
	if c.IsMemberFunction() {
		// A long target (a filter before its map) is laid out too.
		t, err := p.node(c.Target(), indent)
		if err != nil {
			return "", err
		}
		if p.looser(c.Target(), operators.Index) {
			t = "(" + t + ")"
		}
		head.WriteString(t + ".")
	}
	head.WriteString(c.FunctionName() + "(")
	args := c.Args()
	for _, a := range args[:len(args)-1] {
		s, err := p.inline(a)
		if err != nil {
			return "", err
		}
		head.WriteString(s + ", ")
	}
	h := head.String()
	// A short body stays after its call (a map after a long filter).
	if body, err := p.inline(args[len(args)-1]); err != nil || lastColumn(h, indent)+len(body)+1 <= Width {
		return h + body + ")", err
	}
	body, err := p.node(args[len(args)-1], indent+2)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(h, " ") + "\n" + pad(indent+2) + body + ")", nil
}

// chain lays out a run of one logical operator, an operand per line.
func (p printer) chain(op string, e ast.Expr, indent int) (string, error) {
	var operands []ast.Expr
	var flatten func(ast.Expr)
	flatten = func(x ast.Expr) {
		if _, macro := p.info.GetMacroCall(x.ID()); !macro && x.Kind() == ast.CallKind && x.AsCall().FunctionName() == op {
			for _, a := range x.AsCall().Args() {
				flatten(a)
			}
			return
		}
		operands = append(operands, x)
	}
	flatten(e)
	sym := map[string]string{operators.LogicalAnd: "&&", operators.LogicalOr: "||"}[op]
	var b strings.Builder
	for i, x := range operands {
		if i > 0 {
			b.WriteString("\n" + pad(indent) + sym + " ")
		}
		s, err := p.operand(x, op, indent+len(sym)+1)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// operand lays out x as an operand of op, in parentheses when it binds
// less tightly than op.
func (p printer) operand(x ast.Expr, op string, indent int) (string, error) {
	if !p.looser(x, op) {
		return p.node(x, indent)
	}
	s, err := p.node(x, indent+1)
	return "(" + s + ")", err
}

// looser says x is a call of an operator that binds less tightly than op
// (a macro is a call and binds tightest).
func (p printer) looser(x ast.Expr, op string) bool {
	if _, macro := p.info.GetMacroCall(x.ID()); macro || x.Kind() != ast.CallKind {
		return false
	}
	// Precedence is 0 for a function, which binds tightest of all; the
	// higher an operator's number, the looser it binds.
	return operators.Precedence(x.AsCall().FunctionName()) > operators.Precedence(op)
}

// conditional lays out c ? t : f with each branch on its own line.
func (p printer) conditional(args []ast.Expr, indent int) (string, error) {
	cond, err := p.operand(args[0], operators.LogicalOr, indent)
	if err != nil {
		return "", err
	}
	t, err := p.operand(args[1], operators.LogicalOr, indent+4)
	if err != nil {
		return "", err
	}
	// A conditional in the false branch chains without parentheses.
	f, err := p.node(args[2], indent+4)
	if err != nil {
		return "", err
	}
	return cond + "\n" + pad(indent+2) + "? " + t + "\n" + pad(indent+2) + ": " + f, nil
}

func pad(n int) string { return strings.Repeat(" ", n) }

// roots are the names kube-apiserver binds for a policy's expressions.
var roots = map[string]bool{"request": true, "object": true, "oldObject": true, "params": true, "variables": true, "namespaceObject": true, "authorizer": true}

// ClosedSubExpressions lists, as the unparser writes them, the
// sub-expressions of expr at least minLen characters long that read only
// what kube-apiserver binds (request, object, oldObject, params,
// variables...): those a policy variable could hold, unlike a part of a
// macro's body that reads the entry it walks.
func ClosedSubExpressions(expr string, minLen int) ([]string, error) {
	p, e, err := parse(expr)
	if err != nil {
		return nil, err
	}
	w := &closedWalker{p: p, minLen: minLen}
	_, err = w.walk(e)
	return w.out, err
}

// closedWalker collects the closed sub-expressions of one expression.
type closedWalker struct {
	p      printer
	minLen int
	out    []string
}

// walk returns the names e reads that it does not bind itself, and
// collects e when it reads only roots.
func (w *closedWalker) walk(e ast.Expr) (map[string]bool, error) {
	free := map[string]bool{}
	if e.Kind() == ast.IdentKind {
		free[e.AsIdent()] = true
	}
	if err := w.addFree(free, children(e), nil); err != nil {
		return nil, err
	}
	if e.Kind() == ast.ComprehensionKind {
		// The loop's own variables are bound inside it; its range and
		// initial value are read outside and are children too.
		c := e.AsComprehension()
		bound := map[string]bool{c.IterVar(): true, c.IterVar2(): true, c.AccuVar(): true}
		if err := w.addFree(free, []ast.Expr{c.LoopCondition(), c.LoopStep(), c.Result()}, bound); err != nil {
			return nil, err
		}
	}
	if len(free) == 0 || !onlyRoots(free) {
		return free, nil
	}
	s, err := w.p.inline(e)
	if err == nil && len(s) >= w.minLen {
		w.out = append(w.out, s)
	}
	return free, err
}

// addFree walks each of xs and adds what it reads, but bound, to free.
func (w *closedWalker) addFree(free map[string]bool, xs []ast.Expr, bound map[string]bool) error {
	for _, x := range xs {
		f, err := w.walk(x)
		if err != nil {
			return err
		}
		for n := range f {
			if !bound[n] {
				free[n] = true
			}
		}
	}
	return nil
}

// onlyRoots says every name of free is one kube-apiserver binds.
func onlyRoots(free map[string]bool) bool {
	for n := range free {
		if !roots[n] {
			return false
		}
	}
	return true
}

// children are the expressions e reads directly, outside any loop it
// binds: a comprehension's range and initial value (its loop is walked
// apart, with its variables bound).
func children(e ast.Expr) []ast.Expr {
	switch e.Kind() {
	case ast.SelectKind:
		return []ast.Expr{e.AsSelect().Operand()}
	case ast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() {
			return append([]ast.Expr{c.Target()}, c.Args()...)
		}
		return c.Args()
	case ast.ListKind:
		return e.AsList().Elements()
	case ast.MapKind:
		var out []ast.Expr
		for _, en := range e.AsMap().Entries() {
			out = append(out, en.AsMapEntry().Key(), en.AsMapEntry().Value())
		}
		return out
	case ast.StructKind:
		var out []ast.Expr
		for _, f := range e.AsStruct().Fields() {
			out = append(out, f.AsStructField().Value())
		}
		return out
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		return []ast.Expr{c.IterRange(), c.AccuInit()}
	case ast.IdentKind, ast.LiteralKind, ast.UnspecifiedExprKind:
		return nil
	}
	return nil
}
