// Package querycheck checks the syntax of the LogQL and TraceQL queries in
// Loom's Grafana dashboards and datasource provisioning against the grammars
// Loki and Tempo document, and says which labels, attributes and metrics a
// query names, so that a test can match them against real data. It holds no
// Loki or Tempo code: each parser is written from the query language's
// documentation, for the subset those documents define.
package querycheck

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokIdent
	tokString
	tokNumber
	// tokUnit is a number with a unit: a duration (5m, 1h30m, 100ms) or a
	// byte size (10KB, 1.5GiB).
	tokUnit
	tokOp
)

type token struct {
	kind tokenKind
	text string
	// value is a string token's unquoted text.
	value string
	pos   int
}

func (t token) String() string {
	if t.kind == tokEOF {
		return "the end of the query"
	}
	return strconv.Quote(t.text)
}

// language is what differs between the scanners of the three languages.
type language struct {
	name string
	// ops are the operators and punctuation, longest first.
	ops []string
	// identPart reports whether r may continue an identifier (every
	// identifier starts with a letter or _).
	identPart func(r rune) bool
}

func isIdentStart(r rune) bool { return r == '_' || r < utf8.RuneSelf && unicode.IsLetter(r) }

func isLabelRune(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// durationUnits and byteUnits are the unit suffixes Loki, Tempo and
// Prometheus accept on numbers.
var (
	durationUnits = []string{"ns", "us", "µs", "ms", "s", "m", "h", "d", "w", "y"}
	byteUnits     = []string{"b", "kib", "kb", "mib", "mb", "gib", "gb", "tib", "tb", "pib", "pb", "eib", "eb"}
)

// scan splits src into tokens.
func scan(lang language, src string) ([]token, error) {
	var tokens []token
	for pos := 0; pos < len(src); {
		r, size := utf8.DecodeRuneInString(src[pos:])
		switch {
		case r == utf8.RuneError && size == 1:
			return nil, fmt.Errorf("%s: invalid UTF-8 at offset %d", lang.name, pos)
		case unicode.IsSpace(r):
			pos += size
		case r == '#':
			// A comment runs to the end of the line.
			end := strings.IndexByte(src[pos:], '\n')
			if end < 0 {
				end = len(src) - pos
			}
			pos += end
		case r == '"' || r == '`':
			tok, err := scanString(lang, src, pos)
			if err != nil {
				return nil, err
			}
			tokens = append(tokens, tok)
			pos += len(tok.text)
		case r >= '0' && r <= '9' || r == '.' && pos+1 < len(src) && src[pos+1] >= '0' && src[pos+1] <= '9':
			tok, err := scanNumber(lang, src, pos)
			if err != nil {
				return nil, err
			}
			tokens = append(tokens, tok)
			pos += len(tok.text)
		case isIdentStart(r):
			end := pos + size
			for end < len(src) {
				next, n := utf8.DecodeRuneInString(src[end:])
				if !lang.identPart(next) {
					break
				}
				end += n
			}
			tokens = append(tokens, token{kind: tokIdent, text: src[pos:end], pos: pos})
			pos = end
		default:
			op := ""
			for _, candidate := range lang.ops {
				if strings.HasPrefix(src[pos:], candidate) {
					op = candidate
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("%s: unexpected %q at offset %d", lang.name, r, pos)
			}
			tokens = append(tokens, token{kind: tokOp, text: op, pos: pos})
			pos += len(op)
		}
	}
	return append(tokens, token{kind: tokEOF, pos: len(src)}), nil
}

func scanString(lang language, src string, start int) (token, error) {
	quote := src[start]
	for i := start + 1; i < len(src); i++ {
		switch {
		case src[i] == '\\' && quote == '"':
			i++
		case src[i] == quote:
			text := src[start : i+1]
			value, err := strconv.Unquote(text)
			if err != nil {
				return token{}, fmt.Errorf("%s: bad string %s at offset %d: %w", lang.name, text, start, err)
			}
			return token{kind: tokString, text: text, value: value, pos: start}, nil
		case src[i] == '\n' && quote == '"':
			return token{}, fmt.Errorf("%s: string at offset %d runs past the end of the line", lang.name, start)
		}
	}
	return token{}, fmt.Errorf("%s: unterminated string at offset %d", lang.name, start)
}

func scanNumber(lang language, src string, start int) (token, error) {
	end := start
	for end < len(src) && (src[end] >= '0' && src[end] <= '9' || src[end] == '.') {
		end++
	}
	if end < len(src) && (src[end] == 'e' || src[end] == 'E') && end+1 < len(src) && (src[end+1] >= '0' && src[end+1] <= '9' || src[end+1] == '-' || src[end+1] == '+') {
		end += 2
		for end < len(src) && src[end] >= '0' && src[end] <= '9' {
			end++
		}
	}
	if _, err := strconv.ParseFloat(src[start:end], 64); err != nil {
		return token{}, fmt.Errorf("%s: bad number %q at offset %d", lang.name, src[start:end], start)
	}
	unitEnd := end
	for unitEnd < len(src) {
		r, n := utf8.DecodeRuneInString(src[unitEnd:])
		if !unicode.IsLetter(r) && (r < '0' || r > '9') && r != '.' {
			break
		}
		unitEnd += n
	}
	if unitEnd == end {
		return token{kind: tokNumber, text: src[start:end], pos: start}, nil
	}
	text := src[start:unitEnd]
	if !isDuration(text) && !isByteSize(text) {
		return token{}, fmt.Errorf("%s: %q at offset %d is neither a number, a duration (e.g. 5m, 1h30m) nor a byte size (e.g. 10KB)", lang.name, text, start)
	}
	return token{kind: tokUnit, text: text, pos: start}, nil
}

// isDuration accepts a sequence of number+unit pairs, e.g. 1h30m or 100ms.
func isDuration(s string) bool {
	if s == "" {
		return false
	}
	for s != "" {
		digits := 0
		for digits < len(s) && (s[digits] >= '0' && s[digits] <= '9' || s[digits] == '.') {
			digits++
		}
		if digits == 0 {
			return false
		}
		s = s[digits:]
		unit := ""
		for _, u := range durationUnits {
			// The longest unit that matches: "ms" before "m".
			if strings.HasPrefix(s, u) && len(u) > len(unit) {
				unit = u
			}
		}
		if unit == "" {
			return false
		}
		s = s[len(unit):]
	}
	return true
}

func isByteSize(s string) bool {
	digits := 0
	for digits < len(s) && (s[digits] >= '0' && s[digits] <= '9' || s[digits] == '.') {
		digits++
	}
	unit := strings.ToLower(s[digits:])
	for _, u := range byteUnits {
		if unit == u {
			return digits > 0
		}
	}
	return false
}

// parser walks a token slice; each language's parser embeds it.
type parser struct {
	lang   language
	tokens []token
	at     int
}

func (p *parser) peek() token { return p.tokens[p.at] }

func (p *parser) peekAt(offset int) token {
	if p.at+offset >= len(p.tokens) {
		return p.tokens[len(p.tokens)-1]
	}
	return p.tokens[p.at+offset]
}

func (p *parser) next() token {
	t := p.tokens[p.at]
	if t.kind != tokEOF {
		p.at++
	}
	return t
}

// is reports whether the next token is the operator or keyword text.
func (p *parser) is(text string) bool {
	t := p.peek()
	return (t.kind == tokOp || t.kind == tokIdent) && t.text == text
}

func (p *parser) accept(text string) bool {
	if p.is(text) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expect(text string) error {
	if !p.accept(text) {
		return p.errorf("expected %q, found %s", text, p.peek())
	}
	return nil
}

func (p *parser) expectKind(kind tokenKind, what string) (token, error) {
	t := p.peek()
	if t.kind != kind {
		return token{}, p.errorf("expected %s, found %s", what, t)
	}
	return p.next(), nil
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: at offset %d: %s", p.lang.name, p.peek().pos, fmt.Sprintf(format, args...))
}
