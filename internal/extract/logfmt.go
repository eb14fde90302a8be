package extract

import (
	"strconv"
	"strings"
)

// Logfmt appends the key=value pairs of a logfmt line to dst, at most
// maxFields of them; words without '=' are skipped. It reports false, with dst
// unchanged, when the text does not start with a key=value pair: such text is
// not logfmt. Quoted values are unquoted with Go's escapes; an unterminated
// quote runs to the end of the text.
func Logfmt(s string, maxFields int, dst []Field) ([]Field, Limited, bool) {
	start := len(dst)
	var limited Limited
	for i := skipBlank(s, 0); i < len(s); i = skipBlank(s, i) {
		keyEnd := i
		for keyEnd < len(s) && isKeyByte(s[keyEnd]) {
			keyEnd++
		}
		if keyEnd == i || keyEnd == len(s) || s[keyEnd] != '=' {
			if len(dst) == start {
				return dst, 0, false
			}
			i = skipWord(s, i)
			continue
		}
		valStart := keyEnd + 1
		valEnd, value := logfmtValue(s, valStart)
		if len(dst)-start < maxFields {
			dst = append(dst, Field{Key: s[i:keyEnd], Kind: String, Str: value, Start: valStart, End: valEnd})
		} else {
			limited |= LimitedFields
		}
		i = valEnd
	}
	return dst, limited, len(dst) > start
}

// logfmtValue returns the end of the value that starts at i and its text.
func logfmtValue(s string, i int) (end int, value string) {
	if i >= len(s) || s[i] != '"' {
		end = skipWord(s, i)
		return end, s[i:end]
	}
	escaped := false
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			quoted := s[i : j+1]
			if !escaped {
				return j + 1, quoted[1 : len(quoted)-1]
			}
			if v, err := strconv.Unquote(quoted); err == nil {
				return j + 1, v
			}
			return j + 1, quoted[1 : len(quoted)-1]
		}
	}
	return len(s), s[i+1:]
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == '/' || c == '@'
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipBlank(s string, i int) int {
	for i < len(s) && isBlank(s[i]) {
		i++
	}
	return i
}

func skipWord(s string, i int) int {
	if j := strings.IndexAny(s[i:], " \t\n\r"); j >= 0 {
		return i + j
	}
	return len(s)
}
