package lokiexporter

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// LineFormat is how a log record becomes a Loki log line.
type LineFormat string

const (
	// LineFormatJSON writes {"body": <body>, "<attribute>": <value>, ...}.
	LineFormatJSON LineFormat = "json"
	// LineFormatLogfmt writes body=<body> <attribute>=<value> ...
	LineFormatLogfmt LineFormat = "logfmt"
	// LineFormatRaw writes the body alone, as text.
	LineFormatRaw LineFormat = "raw"
)

// bodyKey is the key of the record body in json and logfmt lines.
const bodyKey = "body"

// truncationMarker ends every line cut to line::max_size.
const truncationMarker = "…[truncated]"

// appendLine writes body and attrs (already selected by the caller) in format.
func appendLine(dst []byte, format LineFormat, body pcommon.Value, attrs []attr) []byte {
	switch format {
	case LineFormatRaw:
		return appendText(dst, body)
	case LineFormatLogfmt:
		first := true
		if body.Type() != pcommon.ValueTypeEmpty {
			dst = appendLogfmtPair(dst, bodyKey, body)
			first = false
		}
		for _, a := range attrs {
			if !first {
				dst = append(dst, ' ')
			}
			first = false
			dst = appendLogfmtPair(dst, a.key, a.value)
		}
		return dst
	default:
		dst = append(dst, '{')
		first := true
		if body.Type() != pcommon.ValueTypeEmpty {
			dst = appendJSONString(dst, bodyKey)
			dst = append(dst, ':')
			dst = appendJSONValue(dst, body)
			first = false
		}
		for _, a := range attrs {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, a.key)
			dst = append(dst, ':')
			dst = appendJSONValue(dst, a.value)
		}
		return append(dst, '}')
	}
}

type attr struct {
	key   string
	value pcommon.Value
}

// fitLine cuts line to maxSize bytes, ending in truncationMarker, on a rune boundary.
func fitLine(line []byte, maxSize int) []byte {
	if len(line) <= maxSize {
		return line
	}
	cut := max(maxSize-len(truncationMarker), 0)
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return append(line[:cut], truncationMarker...)
}

// appendText writes v as plain text: strings as they are (made valid UTF-8),
// everything else as JSON.
func appendText(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeEmpty:
		return dst
	case pcommon.ValueTypeStr:
		return appendValidUTF8(dst, v.Str())
	default:
		return appendJSONValue(dst, v)
	}
}

func appendValidUTF8(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return append(dst, s...)
	}
	for _, r := range s { // invalid bytes come out as U+FFFD
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}

// appendLogfmtPair writes key=value, quoting the value when logfmt needs it.
func appendLogfmtPair(dst []byte, key string, v pcommon.Value) []byte {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c <= ' ' || c == '=' || c == '"' || c >= utf8.RuneSelf {
			c = '_'
		}
		dst = append(dst, c)
	}
	dst = append(dst, '=')
	start := len(dst)
	dst = appendText(dst, v)
	if !needsLogfmtQuote(dst[start:]) {
		return dst
	}
	text := string(dst[start:])
	return appendJSONString(dst[:start], text)
}

func needsLogfmtQuote(s []byte) bool {
	if len(s) == 0 {
		return true
	}
	for _, c := range s {
		if c <= ' ' || c == '=' || c == '"' || c == '\\' || c == 0x7f {
			return true
		}
	}
	return false
}

// appendJSONValue writes v as JSON. Bytes become base64 strings; NaN and
// infinities, which JSON cannot hold, become strings.
func appendJSONValue(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendJSONString(dst, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return appendJSONString(dst, strconv.FormatFloat(f, 'g', -1, 64))
		}
		return strconv.AppendFloat(dst, f, 'g', -1, 64)
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool())
	case pcommon.ValueTypeBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes().AsRaw())
		return append(dst, '"')
	case pcommon.ValueTypeMap:
		dst = append(dst, '{')
		first := true
		for k, mv := range v.Map().All() {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONValue(dst, mv)
		}
		return append(dst, '}')
	case pcommon.ValueTypeSlice:
		dst = append(dst, '[')
		for i, sv := range v.Slice().All() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONValue(dst, sv)
		}
		return append(dst, ']')
	default:
		return append(dst, "null"...)
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			dst = utf8.AppendRune(dst, r) // RuneError for invalid bytes
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			dst = append(dst, c)
		}
		i++
	}
	return append(dst, '"')
}
