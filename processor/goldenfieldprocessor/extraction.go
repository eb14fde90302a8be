package goldenfieldprocessor

import (
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/extract"
	"github.com/loom-otel/loom/internal/golden"
)

// bodyFormat is what a log body was parsed as; masking a value in the body depends on it.
type bodyFormat uint8

const (
	formatNone bodyFormat = iota
	formatJSON
	formatLogfmt
	formatText
)

// extractBody finds fields in a log body and adds them as attributes the
// record does not already have. The body is kept, with invalid UTF-8 replaced.
func (c *compiled) extractBody(body pcommon.Value, attrs pcommon.Map, sc *scratch, t *tally) {
	switch body.Type() {
	case pcommon.ValueTypeStr:
		s := body.Str()
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
			body.SetStr(s)
			t.sanitized[issueInvalidUTF8]++
		}
		if !c.cfg.Extract.Enabled {
			return
		}
		if len(s) > c.cfg.Extract.MaxBodyBytes {
			s = extract.TruncateUTF8(s, c.cfg.Extract.MaxBodyBytes)
			sc.oversized = true
			t.sanitized[issueBodyTooLarge]++
		}
		c.parseBody(s, sc, t)
		if c.cfg.Redaction.Enabled {
			c.scrubRawFields(sc, t)
		}
		attrs.EnsureCapacity(attrs.Len() + len(sc.fields) + addedToEveryRecord) // grown once, not field by field
		for _, f := range sc.fields {
			if sc.format == formatText && c.isModelKey(f.Key) && plainWord(f.Str) {
				// "INFO model: model forward completed" names no model.
				t.sanitized[issueNotAModel]++
				continue
			}
			if v, exists := attrs.GetOrPutEmpty(f.Key); !exists {
				setField(v, f)
			}
		}
	case pcommon.ValueTypeMap:
		if c.cfg.Extract.Enabled {
			n := c.flattenMap(body.Map(), "", 1, attrs, 0)
			if n > c.cfg.Extract.MaxFields {
				t.sanitized[issueTooManyFields]++
			}
		}
	}
}

// parseBody fills sc.fields from a string body: a JSON object, else a logfmt
// line, else free text for the configured keys and patterns.
func (c *compiled) parseBody(s string, sc *scratch, t *tally) {
	var limited extract.Limited
	if strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "{") {
		var err error
		sc.fields, limited, err = extract.JSON(s, c.jsonLimits, sc.fields)
		if err == nil {
			sc.format = formatJSON
			t.limited(limited)
			return
		}
		t.sanitized[issueInvalidJSON]++
	}
	var ok bool
	if sc.fields, limited, ok = extract.Logfmt(s, c.cfg.Extract.MaxFields, sc.fields); ok {
		sc.format = formatLogfmt
	} else {
		sc.fields, limited = c.text.Extract(s, c.cfg.Extract.MaxFields, sc.fields)
		sc.format = formatText
	}
	t.limited(limited)
}

// isModelKey says whether key is model_ver or one of its aliases.
func (c *compiled) isModelKey(key string) bool {
	return key == golden.ModelVer || c.fields[key].canonical == golden.ModelVer
}

// plainWord says whether s is a lowercase word with nothing a model name
// carries (a digit, a dash, a dot): what free text says after "model:" when
// it names no model.
func plainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return s != ""
}

func setField(v pcommon.Value, f extract.Field) {
	switch f.Kind {
	case extract.Int:
		v.SetInt(f.Int)
	case extract.Double:
		v.SetDouble(f.Double)
	case extract.Bool:
		v.SetBool(f.Bool)
	default:
		v.SetStr(f.Str)
	}
}

// flattenMap adds the scalar values of a structured body as attributes with
// dotted keys, to the configured depth and field count. It returns the number
// of fields seen, which may exceed the number added.
func (c *compiled) flattenMap(m pcommon.Map, prefix string, depth int, attrs pcommon.Map, seen int) int {
	m.Range(func(k string, v pcommon.Value) bool {
		if prefix != "" {
			k = prefix + "." + k
		}
		if v.Type() == pcommon.ValueTypeMap && depth < c.cfg.Extract.MaxDepth {
			seen = c.flattenMap(v.Map(), k, depth+1, attrs, seen)
			return true
		}
		if seen++; seen > c.cfg.Extract.MaxFields {
			return false
		}
		if _, exists := attrs.Get(k); !exists {
			copyValue(attrs, k, v)
		}
		return seen <= c.cfg.Extract.MaxFields
	})
	return seen
}
