package expr

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Error is a problem with an expression's text: a syntax error from Parse
// or a type error from Compile. Pos is the byte offset in the source where
// the problem starts (0-based).
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("at %d: %s", e.Pos, e.Msg) }

func errorf(pos int, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // plain identifier or keyword
	tQIdent         // `backquoted identifier`
	tInt
	tFloat
	tString
	tOp // punctuation and operators
)

type token struct {
	kind tokKind
	pos  int
	text string // source text; for tString and tQIdent the decoded value
}

// describe renders a token for "got ..." in error messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tIdent:
		if isKeyword(t.text) {
			return strconv.Quote(t.text)
		}
		return "identifier " + strconv.Quote(t.text)
	case tQIdent:
		return "identifier `" + t.text + "`"
	case tInt, tFloat:
		return "number " + t.text
	case tString:
		return "string " + strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

var keywords = map[string]bool{
	"and": true, "or": true, "not": true, "in": true,
	"true": true, "false": true, "null": true,
}

func isKeyword(s string) bool { return keywords[s] }

// identEnd returns where the identifier at s[start] (an ident-start
// byte) ends. A dot followed by an ident-start byte continues it, so a
// column inside a struct is named as its path: user.age, ctx.geo.lat.
func identEnd(s string, start int) int {
	end := start + 1
	for end < len(s) {
		c := s[end]
		if isIdentStart(c) || isDigit(c) || c == '.' && end+1 < len(s) && isIdentStart(s[end+1]) {
			end++
			continue
		}
		break
	}
	return end
}

func isIdentStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// lexer splits the source into tokens on demand.
type lexer struct {
	src string
	pos int
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		switch l.src[l.pos] {
		case ' ', '\t', '\n', '\r':
			l.pos++
			continue
		}
		break
	}
	start := l.pos
	if start >= len(l.src) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := l.src[start]
	switch {
	case isIdentStart(c):
		end := identEnd(l.src, start)
		l.pos = end
		return token{kind: tIdent, pos: start, text: l.src[start:end]}, nil
	case isDigit(c) || c == '.' && start+1 < len(l.src) && isDigit(l.src[start+1]):
		return l.number()
	case c == '"' || c == '\'':
		return l.str(c)
	case c == '`':
		end := start + 1
		for end < len(l.src) && l.src[end] != '`' {
			end++
		}
		if end == len(l.src) {
			return token{}, errorf(start, "unterminated `quoted name`")
		}
		if end == start+1 {
			return token{}, errorf(start, "empty `quoted name`")
		}
		l.pos = end + 1
		return token{kind: tQIdent, pos: start, text: l.src[start+1 : end]}, nil
	}
	two := ""
	if start+1 < len(l.src) {
		two = l.src[start : start+2]
	}
	switch two {
	case "==", "!=", "<=", ">=":
		l.pos += 2
		return token{kind: tOp, pos: start, text: two}, nil
	case "&&":
		return token{}, errorf(start, `unexpected "&&" (use and)`)
	case "||":
		return token{}, errorf(start, `unexpected "||" (use or)`)
	}
	switch c {
	case '(', ')', '[', ']', ',', '+', '-', '*', '/', '%', '<', '>':
		l.pos++
		return token{kind: tOp, pos: start, text: string(c)}, nil
	case '=':
		return token{}, errorf(start, `unexpected "=" (use == to compare)`)
	case '!':
		return token{}, errorf(start, `unexpected "!" (use not, or != to compare)`)
	}
	r, _ := utf8.DecodeRuneInString(l.src[start:])
	if r == utf8.RuneError {
		return token{}, errorf(start, "unexpected byte %#02x", c)
	}
	return token{}, errorf(start, "unexpected character %q (quote odd column names with backquotes: `my col`)", r)
}

// number lexes an integer (digits) or a float (digits with a fraction or
// an exponent). A sign is not part of a number: the parser folds a unary
// minus in front of a literal into it.
func (l *lexer) number() (token, error) {
	s, start := l.src, l.pos
	i := start
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	kind := tInt
	if i < len(s) && s[i] == '.' {
		kind = tFloat
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		kind = tFloat
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return token{}, errorf(start, "malformed number %q: expected digits after the exponent", s[start:i])
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (isIdentStart(s[i]) || s[i] == '.') {
		return token{}, errorf(start, "malformed number %q", s[start:i+1])
	}
	l.pos = i
	return token{kind: kind, pos: start, text: s[start:i]}, nil
}

// str lexes a string literal quoted with q (" or '). Escapes are Go's
// (\n, \t, \\, \", \', \xFF, \u00e9, ...); other bytes are taken as is.
func (l *lexer) str(q byte) (token, error) {
	s, start := l.src, l.pos
	var buf []byte
	i := start + 1
	for {
		if i >= len(s) {
			return token{}, errorf(start, "unterminated string")
		}
		c := s[i]
		if c == q {
			i++
			break
		}
		if c != '\\' {
			buf = append(buf, c)
			i++
			continue
		}
		v, multibyte, tail, err := strconv.UnquoteChar(s[i:], q)
		if err != nil {
			return token{}, errorf(i, "bad escape in string")
		}
		if v < utf8.RuneSelf || !multibyte && v < 256 {
			buf = append(buf, byte(v))
		} else {
			buf = utf8.AppendRune(buf, v)
		}
		i = len(s) - len(tail)
	}
	l.pos = i
	return token{kind: tString, pos: start, text: string(buf)}, nil
}
