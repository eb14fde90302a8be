package golden

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultReqIDFormat is the template of the default req_id format, the one ParseReqID accepts.
const DefaultReqIDFormat = "req-{unix_ms}-{alnum:6}"

// maxReqIDLen bounds the ids a format is matched against, so hostile values cost nothing.
const maxReqIDLen = 256

// placeholders are the pieces a req_id format template may use. {unix_ms} (or {ts})
// is the creation time; the others take an optional fixed length, e.g. {hex:8}.
var placeholders = map[string]string{
	"unix_ms": `[0-9]{13}`,
	"ts":      `[0-9]{13}`,
	"uuid":    `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`,
	"hex":     `[0-9a-f]`,
	"alnum":   `[a-z0-9]`,
	"digits":  `[0-9]`,
}

var placeholderRE = regexp.MustCompile(`\{([a-z_]+)(?::([0-9]+))?\}`)

// ReqIDFormat is one accepted req_id format, compiled from a template such as
// "req-celery-{uuid}" or "req_{ts}_{hex}".
type ReqIDFormat struct {
	re        *regexp.Regexp
	timeGroup int // index of the {unix_ms} capture group; 0 when the format embeds no time
}

// CompileReqIDFormat compiles a template of literal text and placeholders:
// {unix_ms} or {ts} (13-digit unix milliseconds), {uuid} (lowercase), and {hex},
// {alnum} (lowercase), {digits}, each with an optional length ({alnum:6}).
func CompileReqIDFormat(template string) (*ReqIDFormat, error) {
	if template == "" {
		return nil, fmt.Errorf("empty req_id format")
	}
	if strings.ContainsAny(placeholderRE.ReplaceAllString(template, ""), "{}") {
		return nil, fmt.Errorf("req_id format %q: a brace outside a placeholder; placeholders are lowercase, e.g. {uuid} or {hex:8}", template)
	}
	var pattern strings.Builder
	pattern.WriteString("^")
	f := &ReqIDFormat{}
	group, last := 0, 0
	for _, m := range placeholderRE.FindAllStringSubmatchIndex(template, -1) {
		pattern.WriteString(regexp.QuoteMeta(template[last:m[0]]))
		last = m[1]
		name := template[m[2]:m[3]]
		class, ok := placeholders[name]
		if !ok {
			return nil, fmt.Errorf("req_id format %q: unknown placeholder {%s}; use {unix_ms}, {ts}, {uuid}, {hex}, {alnum} or {digits}", template, name)
		}
		fixed := name == "unix_ms" || name == "ts" || name == "uuid"
		switch {
		case m[4] >= 0 && fixed:
			return nil, fmt.Errorf("req_id format %q: {%s} has a fixed length and takes none", template, name)
		case m[4] >= 0:
			n, err := strconv.Atoi(template[m[4]:m[5]])
			if err != nil || n < 1 || n > 128 {
				return nil, fmt.Errorf("req_id format %q: length of {%s} must be 1..128", template, name)
			}
			class += "{" + strconv.Itoa(n) + "}"
		case !fixed:
			class += "+"
		}
		group++
		if name == "unix_ms" || name == "ts" {
			if f.timeGroup != 0 {
				return nil, fmt.Errorf("req_id format %q: more than one time placeholder", template)
			}
			f.timeGroup = group
		}
		pattern.WriteString("(" + class + ")")
	}
	pattern.WriteString(regexp.QuoteMeta(template[last:]))
	pattern.WriteString("$")
	re, err := regexp.Compile(pattern.String())
	if err != nil {
		return nil, fmt.Errorf("req_id format %q: %w", template, err)
	}
	f.re = re
	return f, nil
}

// Match reports whether id has this format and the creation time it embeds
// (the zero time when the format has no {unix_ms}).
func (f *ReqIDFormat) Match(id string) (created time.Time, ok bool) {
	if len(id) > maxReqIDLen {
		return time.Time{}, false
	}
	m := f.re.FindStringSubmatch(id)
	if m == nil {
		return time.Time{}, false
	}
	if f.timeGroup == 0 {
		return time.Time{}, true
	}
	ms, err := strconv.ParseInt(m[f.timeGroup], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// ReqIDMatcher accepts the default req_id format and any configured extra formats.
type ReqIDMatcher struct {
	extra []*ReqIDFormat
}

// NewReqIDMatcher compiles the configured extra formats; the error names the failing template.
func NewReqIDMatcher(extraTemplates []string) (*ReqIDMatcher, error) {
	m := &ReqIDMatcher{}
	for _, t := range extraTemplates {
		f, err := CompileReqIDFormat(t)
		if err != nil {
			return nil, err
		}
		m.extra = append(m.extra, f)
	}
	return m, nil
}

// Parse reports whether id has an accepted format and the creation time it embeds
// (the zero time for formats without one). The default format is tried first.
func (m *ReqIDMatcher) Parse(id string) (created time.Time, ok bool) {
	if created, ok := ParseReqID(id); ok {
		return created, true
	}
	for _, f := range m.extra {
		if created, ok := f.Match(id); ok {
			return created, true
		}
	}
	return time.Time{}, false
}
