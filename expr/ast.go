package expr

import (
	"math"
	"strconv"
	"strings"
)

// Node is a node of a parsed, not yet type-checked expression. String
// renders it back as source that parses to the same tree, with only the
// parentheses precedence needs.
type Node interface {
	Pos() int // byte offset of the node's first token
	String() string
	prec() int
}

// Ident is a column name (or, as cast's second argument, a type name).
// Quoted names were written in backquotes and always name a column.
type Ident struct {
	At     int
	Name   string
	Quoted bool
}

// LitKind says which field of a Lit holds its value.
type LitKind uint8

// Literal kinds.
const (
	IntLit LitKind = iota
	FloatLit
	StringLit
	BoolLit
	NullLit
)

// Lit is a literal. A minus sign directly in front of a number is part of
// the literal, so -1 is a Lit and not a negation.
type Lit struct {
	At    int
	Kind  LitKind
	Int   int64
	Float float64
	Str   string
	Bool  bool
}

// Unary is "-X" or "not X".
type Unary struct {
	At int
	Op string
	X  Node
}

// Binary is "X op Y" for op in or, and, == != < <= > >=, in, not in,
// + - * / %. For in and not in, Y is a *ListLit.
type Binary struct {
	At   int // position of the operator
	Op   string
	X, Y Node
}

// Call is a function call f(args...).
type Call struct {
	At   int
	Func string
	Args []Node
}

// ListLit is a list of values: [a, b] or, after in, (a, b).
type ListLit struct {
	At    int
	Paren bool
	Elems []Node
}

func (n *Ident) Pos() int   { return n.At }
func (n *Lit) Pos() int     { return n.At }
func (n *Unary) Pos() int   { return n.At }
func (n *Binary) Pos() int  { return n.X.Pos() }
func (n *Call) Pos() int    { return n.At }
func (n *ListLit) Pos() int { return n.At }

// Precedence levels, loosest first.
const (
	precOr = iota + 1
	precAnd
	precNot
	precCmp
	precAdd
	precMul
	precNeg
	precPrimary
)

var binaryPrec = map[string]int{
	"or": precOr, "and": precAnd,
	"==": precCmp, "!=": precCmp, "<": precCmp, "<=": precCmp, ">": precCmp, ">=": precCmp,
	"in": precCmp, "not in": precCmp,
	"+": precAdd, "-": precAdd,
	"*": precMul, "/": precMul, "%": precMul,
}

func (n *Ident) prec() int   { return precPrimary }
func (n *Lit) prec() int     { return precPrimary }
func (n *Call) prec() int    { return precPrimary }
func (n *ListLit) prec() int { return precPrimary }
func (n *Binary) prec() int  { return binaryPrec[n.Op] }
func (n *Unary) prec() int {
	if n.Op == "not" {
		return precNot
	}
	return precNeg
}

func (n *Ident) String() string {
	if n.Quoted || !isPlainIdent(n.Name) {
		return "`" + n.Name + "`"
	}
	return n.Name
}

func isPlainIdent(s string) bool {
	return s != "" && isIdentStart(s[0]) && !isKeyword(s) && identEnd(s, 0) == len(s)
}

func (n *Lit) String() string {
	switch n.Kind {
	case IntLit:
		return strconv.FormatInt(n.Int, 10)
	case FloatLit:
		return formatFloat(n.Float)
	case StringLit:
		return strconv.Quote(n.Str)
	case BoolLit:
		return strconv.FormatBool(n.Bool)
	}
	return "null"
}

// formatFloat prints f so that it lexes back as the same float literal.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 0):
		return "inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

func (n *Unary) String() string {
	x := paren(n.X, n.prec(), false)
	if n.Op == "not" {
		return "not " + x
	}
	if l, ok := n.X.(*Lit); ok && (l.Kind == IntLit || l.Kind == FloatLit) {
		// "-1" would parse as the literal -1, not as a negation.
		return "-(" + x + ")"
	}
	if strings.HasPrefix(x, "-") {
		return "- " + x // "- -x": keep the minus signs apart for readers
	}
	return "-" + x
}

func (n *Binary) String() string {
	p := n.prec()
	// Comparisons do not chain, so an operand at their own level needs
	// parentheses on both sides; the others associate to the left.
	return paren(n.X, p, p == precCmp) + " " + n.Op + " " + paren(n.Y, p, true)
}

func paren(n Node, parent int, strict bool) string {
	if p := n.prec(); p < parent || strict && p == parent {
		return "(" + n.String() + ")"
	}
	return n.String()
}

func (n *Call) String() string {
	var b strings.Builder
	b.WriteString(n.Func)
	b.WriteByte('(')
	for i, a := range n.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	b.WriteByte(')')
	return b.String()
}

func (n *ListLit) String() string {
	var b strings.Builder
	open, close := "[", "]"
	if n.Paren {
		open, close = "(", ")"
	}
	b.WriteString(open)
	for i, e := range n.Elems {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.String())
	}
	if n.Paren && len(n.Elems) == 1 {
		b.WriteByte(',')
	}
	b.WriteString(close)
	return b.String()
}
