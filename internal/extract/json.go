package extract

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNotJSONObject means the body is not one well-formed JSON object.
var ErrNotJSONObject = errors.New("not a JSON object")

// JSONLimits bound the work spent on one JSON body.
type JSONLimits struct {
	// MaxDepth is the deepest object level flattened (1: top-level keys only);
	// deeper objects become Raw fields.
	MaxDepth int
	// MaxFields is the most fields returned.
	MaxFields int
}

// JSON appends the fields of a JSON object body to dst: nested keys are joined
// with dots, arrays are kept as Raw JSON text and nulls are skipped. When the
// body is not one well-formed JSON object it returns dst unchanged and
// ErrNotJSONObject, so the caller can treat the body as text.
func JSON(body string, lim JSONLimits, dst []Field) ([]Field, Limited, error) {
	p := jsonParser{s: body, lim: lim, out: dst, start: len(dst)}
	p.skipSpace()
	ok := p.peek() == '{' && p.object("", 1) && p.skipSpace() == len(body)
	if !ok {
		return dst[:p.start], 0, ErrNotJSONObject
	}
	return p.out, p.limited, nil
}

type jsonParser struct {
	s       string
	pos     int
	lim     JSONLimits
	out     []Field
	start   int // len(out) on entry
	limited Limited
}

func (p *jsonParser) peek() byte {
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *jsonParser) skipSpace() int {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return p.pos
		}
	}
	return p.pos
}

func (p *jsonParser) consume(c byte) bool {
	if p.skipSpace() < len(p.s) && p.s[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *jsonParser) emit(f Field) {
	if len(p.out)-p.start >= p.lim.MaxFields {
		p.limited |= LimitedFields
		return
	}
	p.out = append(p.out, f)
}

// object flattens the object at p.pos (at depth, 1 for the body itself) under prefix.
func (p *jsonParser) object(prefix string, depth int) bool {
	p.pos++ // '{'
	if p.consume('}') {
		return true
	}
	for {
		p.skipSpace()
		key, ok := p.str()
		if !ok || !p.consume(':') {
			return false
		}
		if prefix != "" {
			key = prefix + "." + key
		}
		if !p.member(key, depth) {
			return false
		}
		if p.consume('}') {
			return true
		}
		if !p.consume(',') {
			return false
		}
	}
}

// member parses the value of key and emits it.
func (p *jsonParser) member(key string, depth int) bool {
	start := p.skipSpace()
	switch c := p.peek(); {
	case c == '{' && depth < p.lim.MaxDepth:
		return p.object(key, depth+1)
	case c == '{' || c == '[':
		if c == '{' {
			p.limited |= LimitedDepth
		}
		if !p.skipValue() {
			return false
		}
		p.emit(Field{Key: key, Kind: Raw, Str: p.s[start:p.pos], Start: start, End: p.pos})
		return true
	}
	f, ok := p.scalar()
	if ok && f.Kind != null {
		f.Key, f.Start, f.End = key, start, p.pos
		p.emit(f)
	}
	return ok
}

// null is the Kind of a JSON null, which is never emitted.
const null Kind = 255

// scalar parses the string, number, true, false or null at p.pos.
func (p *jsonParser) scalar() (Field, bool) {
	switch c := p.peek(); c {
	case '"':
		v, ok := p.str()
		return Field{Kind: String, Str: v}, ok
	case 't', 'f', 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(p.s)-p.pos >= len(lit) && p.s[p.pos:p.pos+len(lit)] == lit {
				p.pos += len(lit)
				if lit == "null" {
					return Field{Kind: null}, true
				}
				return Field{Kind: Bool, Bool: lit == "true"}, true
			}
		}
		return Field{}, false
	default:
		return p.number()
	}
}

// str parses the string at p.pos and returns its value; a string without
// escapes is returned as a substring of the body, without copying.
func (p *jsonParser) str() (string, bool) {
	if p.peek() != '"' {
		return "", false
	}
	start := p.pos + 1
	escaped := false
	for i := start; i < len(p.s); i++ {
		switch c := p.s[i]; {
		case c == '"':
			p.pos = i + 1
			if !escaped {
				return p.s[start:i], true
			}
			return unescape(p.s[start:i])
		case c == '\\':
			escaped = true
			i++
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// unescape decodes the JSON escapes of a string's content.
func unescape(s string) (string, bool) {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		if i == len(s) {
			return "", false
		}
		switch s[i] {
		case '"', '\\', '/':
			b = append(b, s[i])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(s, i+1)
			if !ok {
				return "", false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				lo, ok := hex4(s, i+3)
				if ok && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
						r = pair
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", false
		}
	}
	return string(b), true
}

func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s[i:i+4], 16, 16)
	return rune(n), err == nil
}

// number parses a JSON number: an Int when it is integral and fits, else a
// Double; a number out of float64 range is kept as its String text.
func (p *jsonParser) number() (Field, bool) {
	start, i := p.pos, p.pos
	digits := func() int {
		n := 0
		for i < len(p.s) && p.s[i] >= '0' && p.s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(p.s) && p.s[i] == '-' {
		i++
	}
	if i < len(p.s) && p.s[i] == '0' {
		i++
	} else if digits() == 0 {
		return Field{}, false
	}
	integral := true
	if i < len(p.s) && p.s[i] == '.' {
		i++
		integral = false
		if digits() == 0 {
			return Field{}, false
		}
	}
	if i < len(p.s) && (p.s[i] == 'e' || p.s[i] == 'E') {
		i++
		integral = false
		if i < len(p.s) && (p.s[i] == '+' || p.s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return Field{}, false
		}
	}
	p.pos = i
	text := p.s[start:i]
	if integral {
		if n, err := strconv.ParseInt(text, 10, 64); err == nil {
			return Field{Kind: Int, Int: n}, true
		}
	}
	if f, err := strconv.ParseFloat(text, 64); err == nil {
		return Field{Kind: Double, Double: f}, true
	}
	return Field{Kind: String, Str: text}, true
}

// skipValue moves past the JSON value at p.pos, checking its syntax without
// recursion, so nesting depth costs memory of one byte per level and no stack.
func (p *jsonParser) skipValue() bool {
	var open []byte // the containers entered and not yet closed
	for {
		// A value is expected here.
		p.skipSpace()
		switch c := p.peek(); c {
		case '{', '[':
			p.pos++
			if p.consume(closer(c)) {
				break
			}
			open = append(open, c)
			if c == '{' && !p.key() {
				return false
			}
			continue
		default:
			if _, ok := p.scalar(); !ok {
				return false
			}
		}
		// After a value: close containers or move to the next element.
		for {
			if len(open) == 0 {
				return true
			}
			top := open[len(open)-1]
			if p.consume(closer(top)) {
				open = open[:len(open)-1]
				continue
			}
			if !p.consume(',') || (top == '{' && !p.key()) {
				return false
			}
			break
		}
	}
}

// key parses `"name":` inside an object being skipped.
func (p *jsonParser) key() bool {
	p.skipSpace()
	_, ok := p.str()
	return ok && p.consume(':')
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}
