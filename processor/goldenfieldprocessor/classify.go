package goldenfieldprocessor

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// wordKinds are the kinds of the words of a compound segment: any content word
// makes it content, unless its last word makes it a quantity or a descriptor.
var wordKinds = func() map[string]segmentKind {
	kinds := map[string]segmentKind{}
	for _, w := range contentWords {
		kinds[w] = segmentContent
	}
	for _, w := range []string{"tokens", "count", "length", "size", "bytes", "usage"} {
		kinds[w] = segmentQuantity
	}
	for _, w := range []string{"role", "type", "id", "hash", "reason", "reasons", "name", "index", "encoding"} {
		kinds[w] = segmentDescriptor
	}
	return kinds
}()

// newSegmentKinds is the table segmentKind looks whole segments up in: the
// built-in words, then the configured raw input (content) and sensitive keys,
// which win over a built-in meaning. Dotted configured names go to pathNames.
func newSegmentKinds(c *Config) (map[string]segmentKind, map[string][]configuredPath) {
	kinds := map[string]segmentKind{"input": segmentContent, "output": segmentContent}
	for _, w := range contentWords {
		kinds[w] = segmentContent
	}
	paths := map[string][]configuredPath{}
	add := func(names []string, kind segmentKind) {
		for _, name := range names {
			if _, leaf := cutLastSegment(name); leaf != name {
				leaf = strings.ToLower(leaf)
				paths[leaf] = append(paths[leaf], configuredPath{name, kind})
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

// roleTableGrowth bounds the keys classified on the hot path that the role
// table remembers: the keys a deployment's services write repeat, and keys
// made up per record (hostile or not) are classified each time once it is full.
const roleTableGrowth = 1024

// maxRememberedKey is the longest key the role table remembers.
const maxRememberedKey = 256

// roleTable answers role with one map lookup: the field table, with
// classify's answers added for the other keys as they are seen. Readers take
// the current map without locking; a new key is added to a copy (at most
// roleTableGrowth times).
type roleTable struct {
	current atomic.Pointer[map[string]knownRole]
	mu      sync.Mutex
	limit   int
}

// knownRole points to a role shared by every record with the key: lookups
// copy a pointer, not the role.
type knownRole struct {
	role  *fieldRole
	known bool
}

func newRoleTable(fields map[string]fieldRole) *roleTable {
	m := make(map[string]knownRole, len(fields))
	for k, role := range fields {
		m[k] = knownRole{&role, true}
	}
	rt := &roleTable{limit: len(m) + roleTableGrowth}
	rt.current.Store(&m)
	return rt
}

func (rt *roleTable) get(k string, classify func() *fieldRole) (*fieldRole, bool) {
	if r, ok := (*rt.current.Load())[k]; ok {
		return r.role, r.known
	}
	role := classify()
	r := knownRole{role, role.input || role.sensitive}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if old := *rt.current.Load(); len(old) < rt.limit && len(k) <= maxRememberedKey {
		m := maps.Clone(old)
		m[strings.Clone(k)] = r
		rt.current.Store(&m)
	}
	return r.role, r.known
}

// The roles classify gives, shared by the keys it classifies; never modified.
var (
	plainRole     = &fieldRole{}
	inputRole     = &fieldRole{input: true}
	sensitiveRole = &fieldRole{sensitive: true}
)

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
func (c *compiled) classify(path string, contentEvent bool) *fieldRole {
	root, last, lastSeg := segmentPlain, segmentPlain, ""
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
			return plainRole
		}
		lastIsRoot = root == segmentPlain && kind >= segmentContent
		if lastIsRoot {
			root = kind
		}
		last, lastSeg = kind, seg
	}
	if root == segmentPlain {
		root = c.configuredPathKind(path, lastSeg)
	}
	switch {
	case last == segmentDescriptor && !lastIsRoot:
		return plainRole
	case root == segmentContent:
		return inputRole
	case root == segmentSensitive:
		return sensitiveRole
	}
	return plainRole
}

// configuredPathKind is the kind of the dotted configured name path ends
// with, looked up by its last segment (leaf).
func (c *compiled) configuredPathKind(path, leaf string) segmentKind {
	candidates, _ := lookupFold(c.paths, leaf)
	for _, p := range candidates {
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
	if kind, ok := lookupFold(c.segments, seg); ok {
		return kind
	}
	lastWord, content := segmentPlain, false
	forEachWord(seg, func(w string) {
		lastWord, _ = lookupFold(wordKinds, w)
		content = content || lastWord == segmentContent
	})
	switch {
	case lastWord == segmentQuantity || lastWord == segmentDescriptor:
		return lastWord
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
		forEachWord(seg, func(w string) {
			found = found || slices.ContainsFunc(contentEventWords, func(x string) bool { return strings.EqualFold(x, w) })
		})
	}
	return found
}

// forEachWord calls f with the words of a segment split at '_', '-' and
// lower-to-upper case changes (input_messages, inputMessages).
func forEachWord(seg string, f func(string)) {
	start := 0
	for i := 0; i <= len(seg); i++ {
		switch {
		case i < len(seg) && (seg[i] == '_' || seg[i] == '-'):
			if i > start {
				f(seg[start:i])
			}
			start = i + 1
		case i == len(seg) || i > start && 'A' <= seg[i] && seg[i] <= 'Z' && 'a' <= seg[i-1] && seg[i-1] <= 'z':
			if i > start {
				f(seg[start:i])
			}
			start = i
		}
	}
}

func isIndex(seg string) bool {
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return false
		}
	}
	return seg != ""
}

// lookupFold looks key up in m, whose keys are lowercase, case-insensitively
// and without allocating: an uppercase key is lowered into a stack buffer (Go
// does not copy a []byte converted to string to index a map).
func lookupFold[V any](m map[string]V, key string) (V, bool) {
	var buf [64]byte
	if len(key) > len(buf) || strings.IndexFunc(key, func(r rune) bool { return 'A' <= r && r <= 'Z' }) < 0 {
		v, ok := m[key]
		return v, ok
	}
	b := buf[:len(key)]
	for i := range len(key) {
		b[i] = key[i]
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	v, ok := m[string(b)]
	return v, ok
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
