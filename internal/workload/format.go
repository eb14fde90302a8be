package workload

import (
	"strconv"
	"strings"
)

// line builds one log body (JSON object, logfmt or plain text) in a reused
// buffer; the generator formats every body with it instead of fmt, which is
// the hot path of the workload.
type line struct{ b []byte }

func (l *line) reset() *line { l.b = l.b[:0]; return l }

func (l *line) text(s string) *line { l.b = append(l.b, s...); return l }

func (l *line) int(n int64) *line { l.b = strconv.AppendInt(l.b, n, 10); return l }

func (l *line) float(f float64, prec int) *line {
	l.b = strconv.AppendFloat(l.b, f, 'f', prec, 64)
	return l
}

func (l *line) String() string { return string(l.b) }

// JSON members: open the object with text("{") and close it with text("}").

func (l *line) jsonKey(k string) *line {
	if n := len(l.b); n > 0 && l.b[n-1] != '{' {
		l.b = append(l.b, ',')
	}
	l.b = appendJSONString(l.b, k)
	l.b = append(l.b, ':')
	return l
}

func (l *line) jsonStr(k, v string) *line {
	l.jsonKey(k)
	l.b = appendJSONString(l.b, v)
	return l
}

func (l *line) jsonInt(k string, n int64) *line { return l.jsonKey(k).int(n) }

func (l *line) jsonFloat(k string, f float64, prec int) *line { return l.jsonKey(k).float(f, prec) }

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// logfmt pairs, separated by single spaces.

func (l *line) kvKey(k string) *line {
	if len(l.b) > 0 {
		l.b = append(l.b, ' ')
	}
	l.b = append(l.b, k...)
	l.b = append(l.b, '=')
	return l
}

func (l *line) kv(k, v string) *line {
	l.kvKey(k)
	if v == "" || strings.ContainsAny(v, " \"=") {
		l.b = strconv.AppendQuote(l.b, v)
	} else {
		l.b = append(l.b, v...)
	}
	return l
}

func (l *line) kvInt(k string, n int64) *line { return l.kvKey(k).int(n) }

func (l *line) kvFloat(k string, f float64, prec int) *line { return l.kvKey(k).float(f, prec) }
