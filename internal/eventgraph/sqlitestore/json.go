package sqlitestore

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// jsonEncoder writes the model's attribute values as JSON into one buffer
// reused from event to event: encoding/json, which reflects over every value
// and allocates for every map, was a seventh of a batch's write time.
type jsonEncoder struct {
	buf  []byte
	keys []string
}

// attrs returns the attributes as a JSON object, keys sorted; NULL when there
// are none. A NaN or an infinity is an error, as with encoding/json.
func (j *jsonEncoder) attrs(attrs map[string]any) (any, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	j.keys = j.keys[:0]
	for k := range attrs {
		j.keys = append(j.keys, k)
	}
	slices.Sort(j.keys)
	j.buf = append(j.buf[:0], '{')
	for i, k := range j.keys {
		if i > 0 {
			j.buf = append(j.buf, ',')
		}
		j.buf = appendString(j.buf, k)
		j.buf = append(j.buf, ':')
		var err error
		if j.buf, err = appendValue(j.buf, attrs[k]); err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
	}
	j.buf = append(j.buf, '}')
	return string(j.buf), nil
}

// list returns the strings as a JSON list.
func (j *jsonEncoder) list(list []string) string {
	j.buf = appendStrings(j.buf[:0], list)
	return string(j.buf)
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendString(b, v), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return b, fmt.Errorf("%v is no JSON number", v)
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case []string:
		return appendStrings(b, v), nil
	}
	other, err := json.Marshal(v) // not the model's: as encoding/json writes it
	return append(b, other...), err
}

func appendStrings(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string. Text that needs no escape (nearly
// all of it) is copied; the rest is left to encoding/json, which escapes it
// and writes invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	if needsEscape(s) {
		quoted, _ := json.Marshal(s) // a string always encodes
		return append(b, quoted...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// needsEscape reports whether s holds a quote, a backslash, a control
// character or invalid UTF-8.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return true
		}
	}
	return !utf8.ValidString(s)
}
