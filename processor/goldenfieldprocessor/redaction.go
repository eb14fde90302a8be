package goldenfieldprocessor

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/extract"
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
	// Separators, or a leading + and country code, are required, so
	// timestamps, ids and plain numbers never match. North American numbers
	// (415-555-0132, (415) 555-0132), then international ones in the groups
	// national formats use (+44 20 7946 0958, +49 30 12345678, +33 1 23 45 67 89).
	patternPhone: func() bodyPattern {
		return bodyPattern{
			re: regexp.MustCompile(`(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\)[ .-]?|\b\d{3}[ .-])\d{3}[ .-]\d{4}\b` +
				`|\+\d{1,3}[ .-]?\(?\d{1,5}\)?(?:[ .-]?\d{2,5}){2,5}\b`),
			hint: func(s string) bool { return hasPhoneTail(s) || hasCountryCode(s) },
		}
	},
	patternAPIKey: func() bodyPattern {
		return bodyPattern{
			re:   regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b|(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*|\bgh[posu]_[A-Za-z0-9]{30,}|\bxox[abprs]-[A-Za-z0-9-]{10,}`),
			hint: hasKeyPrefix,
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

// keyStarts marks the bytes that start an API key or token the api_key
// pattern accepts ("sk-", "AKIA", "bearer" in any case, "ghp_", "xox" ...).
var keyStarts = [256]bool{'s': true, 'A': true, 'B': true, 'b': true, 'g': true, 'x': true}

// hasKeyPrefix reports whether s contains the start of an API key or token.
// It runs on every string attribute and body: one pass, byte by byte, most
// bytes rejected by one table lookup, costs less than searching for each
// prefix, even vectorized, on short strings and on bodies alike.
func hasKeyPrefix(s string) bool {
	for i := 0; i < len(s); i++ {
		if !keyStarts[s[i]] {
			continue
		}
		rest := s[i:]
		var ok bool
		switch s[i] {
		case 's':
			ok = strings.HasPrefix(rest, "sk-")
		case 'A':
			ok = strings.HasPrefix(rest, "AKIA")
		case 'B', 'b': // (?i:bearer)\s
			ok = len(rest) > 6 && strings.EqualFold(rest[1:6], "earer") && strings.IndexByte(" \t\n\f\r", rest[6]) >= 0
		case 'g':
			ok = len(rest) > 3 && rest[1] == 'h' && rest[3] == '_' && strings.IndexByte("posu", rest[2]) >= 0
		case 'x':
			ok = strings.HasPrefix(rest, "xox")
		}
		if ok {
			return true
		}
	}
	return false
}

// hasCountryCode reports whether s has a '+' followed by a digit.
func hasCountryCode(s string) bool {
	for i := strings.IndexByte(s, '+'); i >= 0 && i+1 < len(s); {
		if s[i+1] >= '0' && s[i+1] <= '9' {
			return true
		}
		next := strings.IndexByte(s[i+1:], '+')
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

func compileBodyPatterns(c *RedactionConfig) ([]bodyPattern, []error) {
	var out []bodyPattern
	var errs []error
	for i, name := range c.BodyPatterns {
		build, ok := builtinPatterns[name]
		if !ok {
			errs = append(errs, fmt.Errorf("redaction::body_patterns::%d: unknown pattern %q; use email, phone or api_key, or add a regular expression to redaction::custom_patterns", i, name))
			continue
		}
		out = append(out, build())
	}
	custom, err := compileRegexps("redaction::custom_patterns", c.CustomPatterns)
	if err != nil {
		errs = append(errs, err)
	}
	for _, re := range custom {
		out = append(out, bodyPattern{re: re})
	}
	return out, errs
}

// hashInput returns the input_hash of the raw input field present that comes
// first in the configured order, or "" when there is none or the record
// already has an input_hash. A source field is the key itself or its last
// segments (request.prompt), else the first key under it in the record
// (gen_ai.prompt.0.content: the first message of an indexed prompt, as
// instrumentations write them in order). putInputHash adds it.
func (c *compiled) hashInput(attrs pcommon.Map, sc *scratch) string {
	if len(sc.inputs) == 0 {
		return ""
	}
	if _, ok := attrs.Get(golden.InputHash); ok {
		return ""
	}
	for _, name := range c.cfg.InputHash.SourceFields {
		for _, under := range [2]func(path, name string) bool{hasPathSuffix, hasPathPrefix} {
			// Of several (gen_ai.prompt.0.content, gen_ai.prompt.1.content),
			// the first message: attribute order is no order.
			first := ""
			for _, k := range sc.inputs {
				if under(k, name) && (first == "" || comparePaths(k, first) < 0) {
					first = k
				}
			}
			if first != "" {
				v, _ := attrs.Get(first)
				return golden.HashInputWith(v.AsString(), c.cfg.InputHash.Normalization)
			}
		}
	}
	return ""
}

// putInputHash adds the input_hash hashInput returned once removeAttributes
// has made room, and treats it as removeAttributes treats the others.
func (c *compiled) putInputHash(attrs pcommon.Map, hash string, t *tally) {
	if hash == "" {
		return
	}
	v := attrs.PutEmpty(golden.InputHash)
	v.SetStr(hash)
	if role, _ := c.role(golden.InputHash); c.removeAttribute(golden.InputHash, v, role, t) {
		attrs.Remove(golden.InputHash) // the last attribute: the others keep their order
	}
}

// comparePaths orders dotted keys segment by segment, index segments by
// number: gen_ai.prompt.2.content before gen_ai.prompt.10.content.
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		var x, y string
		x, a, _ = strings.Cut(a, ".")
		y, b, _ = strings.Cut(b, ".")
		c := cmp.Compare(x, y)
		if nx, err := strconv.Atoi(x); err == nil {
			if ny, err := strconv.Atoi(y); err == nil {
				c = cmp.Compare(nx, ny)
			}
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// removeAttributes removes, in one pass, raw input and sensitive attributes
// unless they are masked (the aliases left in normalize); in the values left
// it redacts at any depth (scrubValue). With redaction off, raw input is kept
// and only sanitized.
func (c *compiled) removeAttributes(attrs pcommon.Map, sc *scratch, t *tally) {
	if !c.cfg.Redaction.Enabled {
		for _, k := range sc.inputs {
			if v, ok := attrs.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
				c.sanitize(v, t, true)
			}
		}
		return
	}
	i := -1
	attrs.RemoveIf(func(k string, v pcommon.Value) bool {
		i++
		return c.removeAttribute(k, v, c.noted(sc, i, k), t)
	})
}

// removeAttribute is removeAttributes for one attribute: it says whether to
// remove it, and redacts or scrubs it otherwise.
func (c *compiled) removeAttribute(k string, v pcommon.Value, role *fieldRole, t *tally) (remove bool) {
	switch {
	case role.canonical != "" && !role.keep:
		return true
	case !c.cfg.Redaction.Enabled:
		return false
	case role.input || role.sensitive:
		return c.redactValue(v, role, targetAttribute, t)
	}
	c.scrubValue(v, k, false, targetAttribute, t)
	return false
}

// redactValue counts a raw input or sensitive value at where and masks it, or
// says to remove it.
func (c *compiled) redactValue(v pcommon.Value, role *fieldRole, where target, t *tally) (remove bool) {
	t.redacted(where, role)
	if c.cfg.Redaction.Mode == RedactionMask {
		v.SetStr(redactedValue)
		return false
	}
	return true
}

// redactAttributes redacts a map of attributes outside the record's own:
// resource, scope, span event and link attributes.
func (c *compiled) redactAttributes(attrs pcommon.Map, contentEvent bool, where target, t *tally) {
	if c.cfg.Redaction.Enabled {
		c.scrubMap(attrs, "", contentEvent, where, t)
	}
}

// scrubValue redacts under v, at any depth, the values of raw input and
// sensitive keys, named by their dotted path from path (list positions add no
// segment), and masks the body patterns in every string left.
func (c *compiled) scrubValue(v pcommon.Value, path string, contentEvent bool, where target, t *tally) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		if s := c.maskPatterns(v.Str(), where, t); s != v.Str() {
			v.SetStr(s)
		}
	case pcommon.ValueTypeMap:
		c.scrubMap(v.Map(), path, contentEvent, where, t)
	case pcommon.ValueTypeSlice:
		vs := v.Slice()
		for i := range vs.Len() {
			c.scrubValue(vs.At(i), path, contentEvent, where, t)
		}
	}
}

// scrubMap is scrubValue for a map whose keys are under prefix.
func (c *compiled) scrubMap(m pcommon.Map, prefix string, contentEvent bool, where target, t *tally) {
	m.RemoveIf(func(k string, v pcommon.Value) bool {
		if prefix != "" {
			k = prefix + "." + k
		}
		if role, _ := c.roleIn(k, contentEvent); role.input || role.sensitive {
			return c.redactValue(v, role, where, t)
		}
		c.scrubValue(v, k, contentEvent, where, t)
		return false
	})
}

// redactText redacts free text that names no fields, such as a span name or
// status message: cut at the first mention of a raw input or sensitive key,
// then the body patterns masked.
func (c *compiled) redactText(s string, where target, t *tally) string {
	return c.maskPatterns(c.cutAtSecret(s, false, where, t), where, t)
}

// redactSpan redacts what a span carries besides its attributes: its name and
// status message, its events' names and attributes (in an event that says it
// carries content, isContentEvent, a message key is content too) and its
// links' attributes.
func (c *compiled) redactSpan(span ptrace.Span, t *tally) {
	if !c.cfg.Redaction.Enabled {
		return
	}
	if name := c.redactText(span.Name(), targetSpanName, t); name != span.Name() {
		span.SetName(name)
	}
	if msg := c.redactText(span.Status().Message(), targetStatusMessage, t); msg != span.Status().Message() {
		span.Status().SetMessage(msg)
	}
	events := span.Events()
	for i := range events.Len() {
		e := events.At(i)
		c.redactAttributes(e.Attributes(), isContentEvent(e.Name()), targetEvent, t)
		if name := c.redactText(e.Name(), targetEvent, t); name != e.Name() {
			e.SetName(name)
		}
	}
	links := span.Links()
	for i := range links.Len() {
		c.redactAttributes(links.At(i).Attributes(), false, targetLink, t)
	}
}

// redactBody masks, in a log body, the values of raw input and sensitive
// fields found by extraction and everything the body patterns match. A body
// not parsed whole as JSON or logfmt is cut at the first key that may hold them.
func (c *compiled) redactBody(body pcommon.Value, sc *scratch, t *tally) {
	if !c.cfg.Redaction.Enabled {
		return
	}
	if body.Type() != pcommon.ValueTypeStr {
		c.scrubValue(body, "", false, targetBody, t)
		return
	}
	s := c.maskFields(body.Str(), sc, t)
	if sc.oversized || sc.format != formatJSON && sc.format != formatLogfmt {
		s = c.cutAtSecret(s, sc.oversized, targetBody, t)
	}
	if s = c.maskPatterns(s, targetBody, t); s != body.Str() {
		body.SetStr(s)
	}
}

// maskPatterns masks in s what the body patterns match, counted at where.
func (c *compiled) maskPatterns(s string, where target, t *tally) string {
	for _, p := range c.bodyPatterns {
		if p.hint != nil && !p.hint(s) {
			continue
		}
		s = p.re.ReplaceAllStringFunc(s, func(string) string {
			t.redactions[where]++
			return redactedValue
		})
	}
	return s
}

// bodyMask replaces a body's bytes [start, end) with text, or with the
// redacted value when text is empty.
type bodyMask struct {
	start, end int
	text       string
}

// maskFields replaces the text of sensitive extracted values in s, and that
// of the JSON fields scrubRawFields redacted.
func (c *compiled) maskFields(s string, sc *scratch, t *tally) string {
	sc.masks = sc.masks[:0]
	for i, f := range sc.fields {
		if role, _ := c.roleAt(&sc.masking, i, f.Key); role.input || role.sensitive {
			sc.masks = append(sc.masks, bodyMask{start: f.Start, end: f.End})
		} else if f.Kind == extract.Raw && f.Str != s[f.Start:f.End] { // scrubbed by scrubRawFields
			sc.masks = append(sc.masks, bodyMask{f.Start, f.End, f.Str})
		}
	}
	if len(sc.masks) == 0 {
		return s
	}
	mask := redactedValue
	if sc.format == formatJSON {
		mask = `"` + redactedValue + `"` // the body stays valid JSON
	}
	slices.SortFunc(sc.masks, func(a, b bodyMask) int { return cmp.Compare(a.start, b.start) })
	var b strings.Builder
	last := 0
	for _, m := range sc.masks {
		if m.start < last { // overlaps a span already masked
			continue
		}
		b.WriteString(s[last:m.start])
		if m.text != "" {
			b.WriteString(m.text) // counted by scrubJSON
		} else {
			b.WriteString(mask)
			t.redactions[targetBody]++
		}
		last = m.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// scrubRawFields redacts, in the JSON text of each object nested deeper than
// extraction goes and each array (kept whole as one field), the values that a
// structured body would have redacted, before the field becomes an attribute.
func (c *compiled) scrubRawFields(sc *scratch, t *tally) {
	for i := range sc.fields {
		if f := &sc.fields[i]; f.Kind == extract.Raw && c.keyMention(f.Str) < len(f.Str) {
			f.Str = c.scrubJSON(f.Str, f.Key, t)
		}
	}
}

// scrubJSON redacts JSON text found under the body key path as scrubValue
// does a structured body, and returns it re-encoded when anything changed.
func (c *compiled) scrubJSON(text, path string, t *tally) string {
	var raw any
	v := pcommon.NewValueEmpty()
	if json.Unmarshal([]byte(text), &raw) != nil || v.FromRaw(raw) != nil {
		t.redactions[targetBody]++
		return `"` + redactedValue + `"`
	}
	before := t.redactions[targetBody]
	c.scrubValue(v, path, false, targetBody, t)
	if t.redactions[targetBody] == before {
		return text
	}
	out, err := json.Marshal(v.AsRaw())
	if err != nil {
		return `"` + redactedValue + `"`
	}
	return string(out)
}

// cutAtSecret cuts text whose values could not all be found at the first
// place it names a raw input or sensitive key as a key (keyMention). With
// anyMention, for a body too large to parse whole, any mention of a
// configured name cuts too: the value after it could not be masked.
func (c *compiled) cutAtSecret(s string, anyMention bool, where target, t *tally) string {
	cut := c.keyMention(s)
	if anyMention {
		for _, name := range c.secretNames {
			if i := strings.Index(s[:cut], name); i >= 0 {
				cut = i
			}
		}
	}
	if cut == len(s) {
		return s
	}
	t.redactions[where]++
	return s[:cut] + redactedValue
}

// keyMention returns the offset of the first key in s that classify calls raw
// input or sensitive, written as a key: a name (dotted, as in input.value)
// containing one of keyNames in any case, then an optional closing quote, optional spaces
// and ':' or '='. It returns len(s) if there is none.
func (c *compiled) keyMention(s string) int {
	folded := strings.ToLower(s) // s itself unless it has uppercase letters
	if len(folded) != len(s) {   // a letter whose case changes its length: offsets would differ
		folded = s
	}
	cut := len(s)
	for _, name := range c.keyNames {
		for from := 0; from < cut; {
			i := strings.Index(folded[from:cut], name)
			if i < 0 {
				break
			}
			start, end := i+from, i+from+len(name)
			for start > 0 && isKeyByte(s[start-1]) {
				start--
			}
			for end < len(s) && isKeyByte(s[end]) {
				end++
			}
			if role, _ := c.role(s[start:end]); (role.input || role.sensitive) && isKeyEnd(s, end) {
				cut = start
				break
			}
			from = end
		}
	}
	return cut
}

func isKeyByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '.' || b == '-'
}

// isKeyEnd says whether s, from i, ends a key: an optional quote, spaces, then ':' or '='.
func isKeyEnd(s string, i int) bool {
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	for i < len(s) && s[i] == ' ' {
		i++
	}
	return i < len(s) && (s[i] == ':' || s[i] == '=')
}
