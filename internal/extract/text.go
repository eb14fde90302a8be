package extract

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Text finds fields in free text: values written as key=value or key: value
// after one of a set of known keys, and the named capture groups of patterns.
type Text struct {
	keys     *regexp.Regexp // nil when there are no known keys
	patterns []*regexp.Regexp
}

// NewText compiles a Text extractor. Every pattern must have at least one
// named capture group: group names become field keys.
func NewText(keys, patterns []string) (*Text, error) {
	t := &Text{}
	if len(keys) > 0 {
		quoted := make([]string, len(keys))
		for i, k := range keys {
			if k == "" {
				return nil, fmt.Errorf("key %d is empty", i)
			}
			quoted[i] = regexp.QuoteMeta(k)
		}
		// The key must not continue a longer name: "substage=" is not "stage=".
		re, err := regexp.Compile(`(?:^|[^\w.\-])(` + strings.Join(quoted, "|") + `)[ \t]*[=:][ \t]*("(?:[^"\\\n]|\\.)*"|[^\s,;"'()\[\]{}]+)`)
		if err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		t.keys = re
	}
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
		t.patterns = append(t.patterns, re)
	}
	return t, nil
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
	for _, re := range t.patterns {
		m := re.FindStringSubmatchIndex(s)
		if m == nil {
			continue
		}
		for g, name := range re.SubexpNames() {
			if name != "" && m[2*g] >= 0 && m[2*g+1] > m[2*g] {
				add(Field{Key: name, Kind: String, Str: s[m[2*g]:m[2*g+1]], Start: m[2*g], End: m[2*g+1]})
			}
		}
	}
	if t.keys != nil {
		for _, m := range t.keys.FindAllStringSubmatchIndex(s, -1) {
			add(Field{Key: s[m[2]:m[3]], Kind: String, Str: unquote(s[m[4]:m[5]]), Start: m[4], End: m[5]})
		}
	}
	return dst, limited
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
