package goldenfieldprocessor

import (
	"strings"
)

// segmentKind is what one segment of a dotted attribute path says about the
// value under it. Every decision on whether a key carries a prompt, a
// completion or a configured secret is made from these kinds, in classify.
type segmentKind uint8

const (
	segmentPlain segmentKind = iota
	// segmentIndex is a list position (gen_ai.prompt.0.content): ignored.
	segmentIndex
	// segmentQuantity counts or measures content without carrying it
	// (prompt_tokens, llm.token_count.prompt, content_length): the whole key is plain.
	segmentQuantity
	// segmentDescriptor describes a message without carrying its text
	// (role, finish_reason, tool_call_id); plain when it is the last segment.
	segmentDescriptor
	// segmentContent opens raw input or output: the value under it is content
	// (prompt, completions, input_messages, input.value).
	segmentContent
	// segmentSensitive is a configured redaction.attributes key.
	segmentSensitive
)

// contentWords carry model input or output wherever they appear in a segment,
// also as one word of a compound (system_prompt, inputMessages).
var contentWords = []string{"prompt", "prompts", "completion", "completions", "messages", "content", "contents", "instructions"}

// contentEventWords name, in a span event's name, an event that carries
// content; in such an event "message" is a content key too.
var contentEventWords = append([]string{"message", "choice"}, contentWords...)

// Words that make the last word of a compound segment a quantity or a descriptor.
var (
	quantityWords   = []string{"tokens", "count", "length", "size", "bytes", "usage"}
	descriptorWords = []string{"role", "type", "id", "hash", "reason", "reasons", "name", "index", "encoding"}
)

// newSegmentKinds is the table segmentKind looks whole segments up in: the
// built-in words, then the configured raw input (content) and sensitive keys,
// which win over a built-in meaning. Dotted configured names go to pathNames.
func newSegmentKinds(c *Config) (map[string]segmentKind, []configuredPath) {
	kinds := map[string]segmentKind{"input": segmentContent, "output": segmentContent}
	for _, w := range contentWords {
		kinds[w] = segmentContent
	}
	var paths []configuredPath
	add := func(names []string, kind segmentKind) {
		for _, name := range names {
			if strings.Contains(name, ".") {
				paths = append(paths, configuredPath{name, kind})
			} else {
				kinds[strings.ToLower(name)] = kind
			}
		}
	}
	add(c.InputHash.SourceFields, segmentContent)
	if c.Redaction.Enabled {
		add(c.Redaction.Attributes, segmentSensitive)
	}
	return kinds, paths
}

// configuredPath is a dotted source field or sensitive attribute: it matches a
// key that ends with its segments, numeric segments of the key ignored.
type configuredPath struct {
	name string
	kind segmentKind
}

// classify says whether the attribute at a dotted path is raw input (content)
// or sensitive. Numeric segments are ignored; a quantity segment anywhere makes
// it plain; otherwise the first content or sensitive segment decides, for every
// key under it except one ending in a descriptor (gen_ai.prompt.0.role). In a
// content-bearing span event, "message" opens content too.
func (c *compiled) classify(path string, contentEvent bool) fieldRole {
	root, last := segmentPlain, segmentPlain
	lastIsRoot := false
	for rest := path; rest != ""; {
		seg := rest
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			seg, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		kind := c.segmentKind(seg)
		if contentEvent && kind == segmentPlain && strings.EqualFold(seg, "message") {
			kind = segmentContent
		}
		switch kind {
		case segmentIndex:
			continue
		case segmentQuantity:
			return fieldRole{}
		}
		lastIsRoot = root == segmentPlain && kind >= segmentContent
		if lastIsRoot {
			root = kind
		}
		last = kind
	}
	if root == segmentPlain {
		root = c.configuredPathKind(path)
	}
	if last == segmentDescriptor && !lastIsRoot {
		return fieldRole{}
	}
	return fieldRole{input: root == segmentContent, sensitive: root == segmentSensitive}
}

func (c *compiled) configuredPathKind(path string) segmentKind {
	for _, p := range c.paths {
		if hasPathSuffix(path, p.name) {
			return p.kind
		}
	}
	return segmentPlain
}

// segmentKind classifies one path segment: whole, case-insensitively, then by
// the words of a compound (prompt_tokens, inputMessages, finish_reason).
func (c *compiled) segmentKind(seg string) segmentKind {
	if isIndex(seg) {
		return segmentIndex
	}
	if kind, ok := c.lookupSegment(seg); ok {
		return kind
	}
	lastWord, content := "", false
	forEachWord(seg, func(w string) {
		lastWord = w
		content = content || containsFold(contentWords, w)
	})
	switch {
	case containsFold(quantityWords, lastWord):
		return segmentQuantity
	case containsFold(descriptorWords, lastWord):
		return segmentDescriptor
	case content:
		return segmentContent
	}
	return segmentPlain
}

// isContentEvent says whether a span event's name says it carries content
// (gen_ai.content.prompt, gen_ai.user.message, gen_ai.choice).
func isContentEvent(name string) bool {
	found := false
	for seg := range strings.SplitSeq(name, ".") {
		forEachWord(seg, func(w string) { found = found || containsFold(contentEventWords, w) })
	}
	return found
}

// forEachWord calls f with the words of a segment split at '_', '-' and
// lower-to-upper case changes (input_messages, inputMessages).
func forEachWord(seg string, f func(string)) {
	start := 0
	for i := 1; i <= len(seg); i++ {
		if i < len(seg) && !isWordBreak(seg, i) {
			continue
		}
		if w := strings.Trim(seg[start:i], "_-"); w != "" {
			f(w)
		}
		start = i
	}
}

func isWordBreak(s string, i int) bool {
	c, prev := s[i], s[i-1]
	return c == '_' || c == '-' || 'A' <= c && c <= 'Z' && 'a' <= prev && prev <= 'z'
}

func containsFold(words []string, w string) bool {
	for _, x := range words {
		if strings.EqualFold(x, w) {
			return true
		}
	}
	return false
}

func isIndex(seg string) bool {
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return false
		}
	}
	return seg != ""
}

// lookupSegment looks seg up case-insensitively without allocating: an
// uppercase segment is lowered into a stack buffer (Go does not copy a
// []byte converted to string for a map index).
func (c *compiled) lookupSegment(seg string) (segmentKind, bool) {
	var buf [64]byte
	if len(seg) > len(buf) || strings.IndexFunc(seg, func(r rune) bool { return 'A' <= r && r <= 'Z' }) < 0 {
		kind, ok := c.segments[seg]
		return kind, ok
	}
	b := buf[:len(seg)]
	for i := range len(seg) {
		b[i] = seg[i]
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	kind, ok := c.segments[string(b)]
	return kind, ok
}

// hasPathSuffix reports whether path, its numeric segments ignored, ends with
// the segments of name.
func hasPathSuffix(path, name string) bool {
	for name != "" {
		var seg, want string
		path, seg = cutLastSegment(path)
		if isIndex(seg) {
			continue
		}
		name, want = cutLastSegment(name)
		if !strings.EqualFold(seg, want) {
			return false
		}
	}
	return true
}

// hasPathPrefix reports whether path, its numeric segments ignored, starts
// with the segments of name and goes on below it.
func hasPathPrefix(path, name string) bool {
	for name != "" {
		var seg, want string
		seg, path, _ = strings.Cut(path, ".")
		if isIndex(seg) {
			continue
		}
		want, name, _ = strings.Cut(name, ".")
		if !strings.EqualFold(seg, want) || path == "" {
			return false
		}
	}
	return true
}

func cutLastSegment(path string) (rest, last string) {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}
