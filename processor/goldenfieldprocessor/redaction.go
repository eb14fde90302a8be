package goldenfieldprocessor

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/golden"
)

// redactedValue replaces masked values.
const redactedValue = "[REDACTED]"

// Built-in body patterns.
const (
	patternEmail  = "email"
	patternPhone  = "phone"
	patternAPIKey = "api_key"
)

// bodyPattern is a pattern masked in bodies; hint, when set, is a cheap test
// that must pass before the regular expression runs.
type bodyPattern struct {
	re   *regexp.Regexp
	hint func(string) bool
}

var builtinPatterns = map[string]func() bodyPattern{
	patternEmail: func() bodyPattern {
		return bodyPattern{
			re:   regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`),
			hint: func(s string) bool { return strings.IndexByte(s, '@') >= 0 },
		}
	},
	// Separators are required, so timestamps, ids and plain numbers never match.
	patternPhone: func() bodyPattern {
		return bodyPattern{
			re:   regexp.MustCompile(`(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\)[ .-]?|\b\d{3}[ .-])\d{3}[ .-]\d{4}\b`),
			hint: hasPhoneTail,
		}
	},
	patternAPIKey: func() bodyPattern {
		prefixes := []string{"sk-", "AKIA", "Bearer ", "bearer ", "ghp_", "gho_", "ghs_", "ghu_", "xox"}
		return bodyPattern{
			re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b|(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*|\bgh[posu]_[A-Za-z0-9]{30,}|\bxox[abprs]-[A-Za-z0-9-]{10,}`),
			hint: func(s string) bool {
				return slices.ContainsFunc(prefixes, func(p string) bool { return strings.Contains(s, p) })
			},
		}
	},
}

// hasPhoneTail reports whether s has a separator followed by exactly four
// digits, preceded by a digit or ')': how every phone number the pattern accepts ends.
func hasPhoneTail(s string) bool {
	for i := 1; i+4 < len(s)+1; i++ {
		if c := s[i]; c != '-' && c != '.' && c != ' ' {
			continue
		}
		if p := s[i-1]; (p < '0' || p > '9') && p != ')' {
			continue
		}
		j := i + 1
		for j < len(s) && j-i <= 5 && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j-i-1 == 4 {
			return true
		}
	}
	return false
}

func compileBodyPatterns(c *RedactionConfig) ([]bodyPattern, []error) {
	var out []bodyPattern
	var errs []error
	for i, name := range c.BodyPatterns {
		build, ok := builtinPatterns[name]
		if !ok {
			errs = append(errs, fmt.Errorf("redaction.body_patterns[%d]: unknown pattern %q; use email, phone or api_key, or add a regular expression to redaction.custom_patterns", i, name))
			continue
		}
		out = append(out, build())
	}
	custom, err := compileRegexps("redaction.custom_patterns", c.CustomPatterns)
	if err != nil {
		errs = append(errs, err)
	}
	for _, re := range custom {
		out = append(out, bodyPattern{re: re})
	}
	return out, errs
}

// hashInput sets input_hash from the raw input field present that comes first
// in the configured order, unless the record already has an input_hash. A
// source field is the key itself or its last segments (request.prompt), else
// the first key under it in the record (gen_ai.prompt.0.content: the first
// message of an indexed prompt, as instrumentations write them in order).
func (c *compiled) hashInput(attrs pcommon.Map, sc *scratch) {
	if len(sc.inputs) == 0 {
		return
	}
	if _, ok := attrs.Get(golden.InputHash); ok {
		return
	}
	for _, name := range c.cfg.InputHash.SourceFields {
		for _, under := range [2]func(path, name string) bool{hasPathSuffix, hasPathPrefix} {
			for _, k := range sc.inputs {
				if under(k, name) {
					v, _ := attrs.Get(k)
					attrs.PutStr(golden.InputHash, golden.HashInputWith(v.AsString(), c.cfg.InputHash.Normalization))
					return
				}
			}
		}
	}
}

// removeAttributes removes, in one pass, the aliases that were copied to their
// canonical names and, unless they are masked, raw input and sensitive
// attributes. With redaction off, raw input is kept and only sanitized.
func (c *compiled) removeAttributes(attrs pcommon.Map, sc *scratch, t *tally) {
	redact := c.cfg.Redaction.Enabled
	if redact {
		t.redactions[targetInput] += int64(len(sc.inputs))
		t.redactions[targetAttribute] += int64(len(sc.secrets))
	} else {
		for _, k := range sc.inputs {
			if v, ok := attrs.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
				c.sanitize(v, t)
			}
		}
	}
	if redact && c.cfg.Redaction.Mode == RedactionMask {
		for _, k := range slices.Concat(sc.inputs, sc.secrets) {
			attrs.PutStr(k, redactedValue)
		}
		redact = false
	}
	if len(sc.aliases) == 0 && (!redact || len(sc.inputs)+len(sc.secrets) == 0) {
		return
	}
	attrs.RemoveIf(func(k string, _ pcommon.Value) bool {
		role, _ := c.role(k)
		return role.canonical != "" && !role.keep || redact && (role.input || role.sensitive)
	})
}

// redactBody masks, in a log body, the values of raw input and sensitive
// fields found by extraction and everything the body patterns match.
func (c *compiled) redactBody(body pcommon.Value, sc *scratch, t *tally) {
	if !c.cfg.Redaction.Enabled {
		return
	}
	switch body.Type() {
	case pcommon.ValueTypeMap:
		t.redactions[targetBody] += int64(c.redactMap(body.Map(), "", 1))
	case pcommon.ValueTypeStr:
		s := c.maskFields(body.Str(), sc, t)
		if sc.oversized {
			s = c.cutAtSecret(s, t)
		}
		for _, p := range c.bodyPatterns {
			if p.hint != nil && !p.hint(s) {
				continue
			}
			s = p.re.ReplaceAllStringFunc(s, func(string) string {
				t.redactions[targetBody]++
				return redactedValue
			})
		}
		if s != body.Str() {
			body.SetStr(s)
		}
	}
}

// maskFields replaces the text of sensitive extracted values in s.
func (c *compiled) maskFields(s string, sc *scratch, t *tally) string {
	sc.masks = sc.masks[:0]
	for _, f := range sc.fields {
		if role, _ := c.role(f.Key); role.input || role.sensitive {
			sc.masks = append(sc.masks, [2]int{f.Start, f.End})
		}
	}
	if len(sc.masks) == 0 {
		return s
	}
	mask := redactedValue
	if sc.format == formatJSON {
		mask = `"` + redactedValue + `"` // the body stays valid JSON
	}
	slices.SortFunc(sc.masks, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var b strings.Builder
	last := 0
	for _, m := range sc.masks {
		if m[0] < last { // overlaps a span already masked
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(mask)
		last = m[1]
		t.redactions[targetBody]++
	}
	b.WriteString(s[last:])
	return b.String()
}

// cutAtSecret cuts a body that was too large to parse whole at the first
// mention of a raw input or sensitive key: the value after it could not be
// found, so it cannot be masked and must not leave.
func (c *compiled) cutAtSecret(s string, t *tally) string {
	cut := len(s)
	for _, name := range c.secretNames {
		if i := strings.Index(s[:cut], name); i >= 0 {
			cut = i
		}
	}
	if cut == len(s) {
		return s
	}
	t.redactions[targetBody]++
	return s[:cut] + redactedValue
}

// redactMap applies the attribute redaction to a structured body, nested keys
// named by their dotted path, and returns the number of values redacted.
func (c *compiled) redactMap(m pcommon.Map, prefix string, depth int) int {
	n := 0
	mask := c.cfg.Redaction.Mode == RedactionMask
	m.RemoveIf(func(k string, v pcommon.Value) bool {
		if prefix != "" {
			k = prefix + "." + k
		}
		if role, _ := c.role(k); role.input || role.sensitive {
			n++
			if mask {
				v.SetStr(redactedValue)
			}
			return !mask
		}
		if v.Type() == pcommon.ValueTypeMap && depth < c.cfg.Extract.MaxDepth {
			n += c.redactMap(v.Map(), k, depth+1)
		}
		return false
	})
	return n
}
