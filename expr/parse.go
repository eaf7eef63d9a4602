package expr

import (
	"errors"
	"math"
	"strconv"
)

// maxDepth bounds nesting so that a hostile expression cannot exhaust the
// stack of the recursive-descent parser (or of the checker after it).
const maxDepth = 200

// maxNodes bounds the size of an expression (long flat chains like
// a + b + c + ... are not deep while parsing but are afterwards).
const maxNodes = 10000

// Parse parses an expression. It checks syntax only; Compile also checks
// names and types. The grammar, loosest binding first:
//
//	expr    = and { "or" and }
//	and     = not { "and" not }
//	not     = "not" not | cmp
//	cmp     = sum [ ("==" | "!=" | "<" | "<=" | ">" | ">=") sum
//	              | ["not"] "in" ( "(" [list] ")" | "[" [list] "]" ) ]
//	sum     = prod { ("+" | "-") prod }
//	prod    = neg { ("*" | "/" | "%") neg }
//	neg     = "-" neg | primary
//	primary = number | string | "true" | "false" | "null"
//	        | name | name "(" [list] ")" | "`" any "`"
//	        | "(" expr ")" | "[" [list] "]"
//	list    = expr { "," expr } [","]
func Parse(src string) (Node, error) {
	p := &parser{lex: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, errorf(p.tok.pos, "expected an operator or the end of the expression, got %s", p.tok.describe())
	}
	return n, nil
}

type parser struct {
	lex   lexer
	tok   token // current token
	depth int
	nodes int // operators and list elements so far, bounded by maxNodes
}

// grow counts one more operator or list element.
func (p *parser) grow(at int) error {
	p.nodes++
	if p.nodes > maxNodes {
		return errorf(at, "expression has more than %d operators and values; split it", maxNodes)
	}
	return nil
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// isOp reports whether the current token is the operator or punctuation text.
func (p *parser) isOp(text string) bool { return p.tok.kind == tOp && p.tok.text == text }

// isKw reports whether the current token is the keyword text.
func (p *parser) isKw(text string) bool { return p.tok.kind == tIdent && p.tok.text == text }

// expect consumes the operator text or fails with "expected text what,
// got ...".
func (p *parser) expect(text, what string) error {
	if !p.isOp(text) {
		return errorf(p.tok.pos, "expected %q %s, got %s", text, what, p.tok.describe())
	}
	return p.advance()
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return errorf(p.tok.pos, "expression nested more than %d deep", maxDepth)
	}
	return nil
}

func (p *parser) expr() (Node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	return p.binary(precOr)
}

// binary parses the left-associative levels or, and, + -, * / %.
func (p *parser) binary(level int) (Node, error) {
	var next func() (Node, error)
	switch level {
	case precOr:
		next = func() (Node, error) { return p.binary(precAnd) }
	case precAnd:
		next = p.not
	case precAdd:
		next = func() (Node, error) { return p.binary(precMul) }
	case precMul:
		next = p.neg
	}
	x, err := next()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tOp || p.tok.kind == tIdent {
		op := p.tok.text
		if binaryPrec[op] != level || op == "in" {
			return x, nil
		}
		at := p.tok.pos
		if err := p.grow(at); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		y, err := next()
		if err != nil {
			return nil, err
		}
		x = &Binary{At: at, Op: op, X: x, Y: y}
	}
	return x, nil
}

func (p *parser) not() (Node, error) {
	if p.isKw("not") {
		at := p.tok.pos
		if err := p.advance(); err != nil {
			return nil, err
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
		x, err := p.not()
		p.depth--
		if err != nil {
			return nil, err
		}
		return &Unary{At: at, Op: "not", X: x}, nil
	}
	return p.cmp()
}

func (p *parser) cmp() (Node, error) {
	x, err := p.binary(precAdd)
	if err != nil {
		return nil, err
	}
	op, at := p.tok.text, p.tok.pos
	switch {
	case p.tok.kind == tOp && binaryPrec[op] == precCmp:
		if err := p.advance(); err != nil {
			return nil, err
		}
		y, err := p.binary(precAdd)
		if err != nil {
			return nil, err
		}
		x = &Binary{At: at, Op: op, X: x, Y: y}
	case p.tok.kind == tIdent && (op == "in" || op == "not"):
		if err := p.advance(); err != nil {
			return nil, err
		}
		if op == "not" {
			if !p.isKw("in") {
				return nil, errorf(p.tok.pos, `expected "in" after "not", got %s`, p.tok.describe())
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
			op = "not in"
		}
		if !p.isOp("(") && !p.isOp("[") {
			return nil, errorf(p.tok.pos, `expected "(" or "[" after %q, got %s`, op, p.tok.describe())
		}
		y, err := p.list(op)
		if err != nil {
			return nil, err
		}
		x = &Binary{At: at, Op: op, X: x, Y: y}
	default:
		return x, nil
	}
	if p.tok.kind == tOp && binaryPrec[p.tok.text] == precCmp || p.isKw("in") {
		return nil, errorf(p.tok.pos, "comparisons do not chain: write a < b and b < c, or add parentheses")
	}
	return x, nil
}

func (p *parser) neg() (Node, error) {
	if !p.isOp("-") {
		return p.primary()
	}
	at := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tInt || p.tok.kind == tFloat {
		return p.number(at, "-")
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	x, err := p.neg()
	p.depth--
	if err != nil {
		return nil, err
	}
	return &Unary{At: at, Op: "-", X: x}, nil
}

// number turns the current number token, with sign "" or "-", into a Lit
// starting at at.
func (p *parser) number(at int, sign string) (Node, error) {
	t := p.tok
	lit := &Lit{At: at}
	if t.kind == tInt {
		v, err := strconv.ParseInt(sign+t.text, 10, 64)
		if err != nil {
			return nil, errorf(at, "integer %s%s does not fit in int64", sign, t.text)
		}
		lit.Kind, lit.Int = IntLit, v
	} else {
		v, err := strconv.ParseFloat(sign+t.text, 64)
		if err != nil && (!errors.Is(err, strconv.ErrRange) || math.IsInf(v, 0)) {
			return nil, errorf(at, "number %s%s is out of the float64 range", sign, t.text)
		}
		lit.Kind, lit.Float = FloatLit, v
	}
	return lit, p.advance()
}

func (p *parser) primary() (Node, error) {
	t := p.tok
	switch t.kind {
	case tInt, tFloat:
		return p.number(t.pos, "")
	case tString:
		return &Lit{At: t.pos, Kind: StringLit, Str: t.text}, p.advance()
	case tQIdent:
		return &Ident{At: t.pos, Name: t.text, Quoted: true}, p.advance()
	case tIdent:
		switch t.text {
		case "true", "false":
			return &Lit{At: t.pos, Kind: BoolLit, Bool: t.text == "true"}, p.advance()
		case "null":
			return &Lit{At: t.pos, Kind: NullLit}, p.advance()
		case "and", "or", "not", "in":
			return nil, errorf(t.pos, "expected an operand, got %s", t.describe())
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if !p.isOp("(") {
			return &Ident{At: t.pos, Name: t.text}, nil
		}
		l, err := p.list(t.text)
		if err != nil {
			return nil, err
		}
		return &Call{At: t.pos, Func: t.text, Args: l.Elems}, nil
	case tOp:
		switch t.text {
		case "(":
			if err := p.advance(); err != nil {
				return nil, err
			}
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				return nil, errorf(p.tok.pos, `unexpected ",": a (tuple) is only allowed after in; use [a, b] for a list`)
			}
			return x, p.expect(")", "to close the parenthesis")
		case "[":
			return p.list("")
		}
	}
	return nil, errorf(t.pos, "expected an operand, got %s", t.describe())
}

// list parses "(" or "[" then comma-separated expressions then the
// matching closer. of names what the list belongs to, for messages: a
// function name, "in", or "" for a bracketed list literal.
func (p *parser) list(of string) (*ListLit, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	l := &ListLit{At: p.tok.pos, Paren: p.tok.text == "("}
	closer, what := "]", "to close the list"
	if l.Paren {
		closer = ")"
		what = "after the arguments of " + of
		if of == "in" || of == "not in" {
			what = "to close the values after " + of
		}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	for !p.isOp(closer) {
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		l.Elems = append(l.Elems, x)
		if err := p.grow(x.Pos()); err != nil {
			return nil, err
		}
		if p.isOp(",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.isOp(closer) {
			return nil, errorf(p.tok.pos, "expected \",\" or %q %s, got %s", closer, what, p.tok.describe())
		}
	}
	return l, p.advance()
}
