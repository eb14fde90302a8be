package policy

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStage(t *testing.T) {
	p, err := NewStage([]string{"cache/miss*", "model/?orward"})
	require.NoError(t, err)
	for stage, want := range map[string]bool{
		"cache/miss": true, "cache/miss/cold": true, "cache/write": false,
		"model/forward": true, "model/xorward": true, "model/forwards": false, "": false,
	} {
		assert.Equal(t, want, p.MatchRecord(&Record{Stage: stage}), stage)
	}
	for _, bad := range [][]string{nil, {""}} {
		_, err := NewStage(bad)
		assert.Error(t, err)
	}
}

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true}, {"", "a", false}, {"*", "", true}, {"*", "a/b/c", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"*a*", "bab", true},
		{"?", "", false}, {"a?c", "abc", true}, {"**", "x", true}, {"a*", "b", false},
		{"*miss", "cache/miss", true}, {"cache/*/x", "cache/a/b/x", true},
	} {
		assert.Equal(t, tc.want, MatchGlob(tc.pattern, tc.s), "%q ~ %q", tc.pattern, tc.s)
	}
}

// globRegexp is the reference meaning of a glob: * is .*, ? is one byte.
func globRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`[\x00-\xff]`)
		default:
			b.WriteString(regexp.QuoteMeta(string([]byte{c})))
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

func FuzzMatchGlob(f *testing.F) {
	for _, seed := range [][2]string{{"cache/miss*", "cache/miss/x"}, {"a*b?c", "aXXbYc"}, {"*?*", ""}, {"\xff*", "\xff\xfe"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 256 {
			return
		}
		got := MatchGlob(pattern, s) // must not panic, whatever the bytes
		// The reference regexp reads runes: compare on ASCII only.
		if !isASCII(pattern) || !isASCII(s) {
			return
		}
		if want := globRegexp(pattern).MatchString(s); got != want {
			t.Fatalf("MatchGlob(%q, %q) = %v, regexp says %v", pattern, s, got, want)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
