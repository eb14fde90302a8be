package extract

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Text finds fields in free text: values written as key=value or key: value
// after one of a set of known keys, and the named capture groups of patterns.
type Text struct {
	keys     map[string]struct{}
	keyLens  []int // the keys' distinct lengths, longest first
	patterns []pattern
}

// pattern is a regular expression and the literal every match of it starts
// with, after assertions such as \b; "" when there is none.
type pattern struct {
	re    *regexp.Regexp
	start string
}

// NewText compiles a Text extractor. Every pattern must have at least one
// named capture group: group names become field keys. A key is a name: it
// holds no space, tab, '=' or ':'.
func NewText(keys, patterns []string) (*Text, error) {
	t := &Text{}
	for i, k := range keys {
		switch {
		case k == "":
			return nil, fmt.Errorf("key %d is empty", i)
		case !utf8.ValidString(k):
			return nil, fmt.Errorf("key %d (%q) is not UTF-8", i, k)
		case strings.ContainsAny(k, " \t=:"):
			return nil, fmt.Errorf("key %d (%q) holds a space, tab, '=' or ':': write the name alone", i, k)
		}
		if t.keys == nil {
			t.keys = map[string]struct{}{}
		}
		if _, dup := t.keys[k]; !dup && !slices.Contains(t.keyLens, len(k)) {
			t.keyLens = append(t.keyLens, len(k))
		}
		t.keys[k] = struct{}{}
	}
	slices.SortFunc(t.keyLens, func(a, b int) int { return b - a })
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("pattern %d: %w", i, err)
		}
		named := false
		for _, name := range re.SubexpNames() {
			named = named || name != ""
		}
		if !named {
			return nil, fmt.Errorf("pattern %d (%s) has no named capture group such as (?P<req_id>...)", i, p)
		}
		t.patterns = append(t.patterns, pattern{re, literalStart(p)})
	}
	return t, nil
}

// literalStart returns the case-sensitive literal that every match of the
// pattern p (which compiles) starts with, after the assertions \b, \B, ^ and
// \A and inside captures, or "" if it need not start with one.
func literalStart(p string) string {
	re, err := syntax.Parse(p, syntax.Perl)
	for err == nil {
		switch re.Op {
		case syntax.OpCapture:
			re = re.Sub[0]
			continue
		case syntax.OpConcat:
			i := 0
			for i < len(re.Sub) && slices.Contains([]syntax.Op{syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpBeginLine, syntax.OpBeginText}, re.Sub[i].Op) {
				i++
			}
			if i == len(re.Sub) {
				return ""
			}
			re = re.Sub[i]
			continue
		case syntax.OpLiteral:
			if re.Flags&syntax.FoldCase == 0 {
				return string(re.Rune)
			}
		}
		return ""
	}
	return ""
}

// find is re.FindStringSubmatchIndex(s). When every match starts with a
// literal, none starts before its first occurrence in s: the search starts
// there, with the one byte before it that \b and (?m)^ look at.
func (p pattern) find(s string) []int {
	if p.start == "" {
		return p.re.FindStringSubmatchIndex(s)
	}
	i := strings.Index(s, p.start)
	if i < 0 {
		return nil
	}
	from := max(i-1, 0)
	m := p.re.FindStringSubmatchIndex(s[from:])
	for j := range m {
		if m[j] >= 0 {
			m[j] += from
		}
	}
	return m
}

// Extract appends the fields found in s to dst, at most maxFields of them,
// patterns first and then known keys, each in order of appearance. The same key
// may be returned more than once; callers keep the first.
func (t *Text) Extract(s string, maxFields int, dst []Field) ([]Field, Limited) {
	start := len(dst)
	var limited Limited
	add := func(f Field) {
		if len(dst)-start < maxFields {
			dst = append(dst, f)
		} else {
			limited |= LimitedFields
		}
	}
	for _, p := range t.patterns {
		m := p.find(s)
		if m == nil {
			continue
		}
		for g, name := range p.re.SubexpNames() {
			if name != "" && m[2*g] >= 0 && m[2*g+1] > m[2*g] {
				add(Field{Key: name, Kind: String, Str: s[m[2*g]:m[2*g+1]], Start: m[2*g], End: m[2*g+1]})
			}
		}
	}
	if t.keys != nil {
		t.keyValues(s, add)
	}
	return dst, limited
}

// keyValues finds "key = value" and "key: value" after known keys, left to
// right without overlap: a key not continuing a longer name ("substage=" is
// not "stage="), spaces or tabs, '=' or ':', spaces or tabs, and a value that
// is double-quoted (backslash escapes, one line) or runs to a space or one
// of ,;"'()[]{}. It scans from separator to separator instead of trying
// every key at every position, as the regular expression it replaced did
// (about 4% of the gateway's CPU, FuzzTextKeysAgreeWithTheRegexp).
func (t *Text) keyValues(s string, add func(Field)) {
	end := 0 // of the last match: the next one, and the character before its key, start here or later
	for p := 0; p < len(s); p++ {
		i := strings.IndexAny(s[p:], "=:")
		if i < 0 {
			return
		}
		p += i
		keyEnd := p
		for keyEnd > 0 && isSpaceOrTab(s[keyEnd-1]) {
			keyEnd--
		}
		keyStart, ok := t.keyEndingAt(s, keyEnd, end)
		if !ok {
			continue
		}
		valueStart := p + 1
		for valueStart < len(s) && isSpaceOrTab(s[valueStart]) {
			valueStart++
		}
		valueEnd, ok := valueAt(s, valueStart)
		if !ok {
			continue
		}
		add(Field{Key: s[keyStart:keyEnd], Kind: String, Str: unquote(s[valueStart:valueEnd]), Start: valueStart, End: valueEnd})
		end, p = valueEnd, valueEnd-1
	}
}

// keyEndingAt returns the start of the longest known key that ends at e and
// begins the text or follows a character that names do not hold, at floor
// or later.
func (t *Text) keyEndingAt(s string, e, floor int) (int, bool) {
	for _, n := range t.keyLens {
		k := e - n
		if k < floor || k > 0 && (k-1 < floor || isNameByte(s[k-1])) {
			continue
		}
		if _, known := t.keys[s[k:e]]; known {
			return k, true
		}
	}
	return 0, false
}

// valueAt returns the end of the value that starts at i.
func valueAt(s string, i int) (int, bool) {
	if i >= len(s) {
		return 0, false
	}
	if s[i] != '"' {
		j := i
		for j < len(s) && !endsBareValue(s[j]) {
			j++
		}
		return j, j > i
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '"':
			return j + 1, true
		case '\n':
			return 0, false
		case '\\':
			if j+1 == len(s) || s[j+1] == '\n' {
				return 0, false
			}
			j++
		}
	}
	return 0, false
}

func isSpaceOrTab(b byte) bool { return b == ' ' || b == '\t' }

// isNameByte: b continues a name (a letter, digit, '_', '.' or '-').
func isNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-'
}

func endsBareValue(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\f', '\r', ',', ';', '"', '\'', '(', ')', '[', ']', '{', '}':
		return true
	}
	return false
}

func unquote(v string) string {
	if len(v) < 2 || v[0] != '"' {
		return v
	}
	if u, err := strconv.Unquote(v); err == nil {
		return u
	}
	return v[1 : len(v)-1]
}
