package goldenfieldprocessor

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/extract"
	"github.com/loom-otel/loom/internal/golden"
)

// fieldRole says what the processor does with an attribute of a given key.
type fieldRole struct {
	canonical string       // set for an alias: the name its value moves to
	keep      bool         // the alias stays in place after its value is copied (gen_ai.*)
	convert   golden.Alias // scaling, prefix trimming and precedence of a default alias
	numeric   bool         // the value (of the canonical field) must be a number
	input     bool         // raw input: hashed into input_hash, then redacted
	sensitive bool         // redacted
}

// newFieldTable merges the default aliases with the configured ones and marks
// numeric, raw input and sensitive keys; one map lookup per attribute then tells
// the hot path everything it needs.
func newFieldTable(c *Config) (map[string]fieldRole, []error) {
	aliases := golden.DefaultAliases()
	for alias, canonical := range c.Normalize.Aliases {
		if canonical == "" {
			delete(aliases, alias)
		} else {
			aliases[alias] = canonical
		}
	}
	var errs []error
	numeric := map[string]bool{}
	for _, f := range c.Normalize.NumericFields {
		numeric[f] = true
		if canonical, ok := aliases[f]; ok {
			errs = append(errs, fmt.Errorf("normalize::numeric_fields: %q is an alias of %q; list the canonical name", f, canonical))
		}
	}
	isNumeric := func(name string) bool { return numeric[name] || golden.IsResourceUsage(name) }

	table := map[string]fieldRole{}
	for _, alias := range slices.Sorted(maps.Keys(aliases)) {
		canonical := aliases[alias]
		if _, chained := aliases[canonical]; chained || alias == "" {
			errs = append(errs, fmt.Errorf("normalize::aliases::%s: maps to %q, which is itself an alias; map every alias straight to a canonical name", alias, canonical))
			continue
		}
		role := fieldRole{canonical: canonical, keep: golden.KeepsSource(alias), numeric: isNumeric(canonical)}
		if convert, ok := golden.AliasOf(alias); ok && convert.Canonical == canonical {
			role.convert = convert
		}
		table[alias] = role
	}
	for f := range numeric {
		table[f] = fieldRole{numeric: true}
	}
	mark := func(key string, names []string, set func(*fieldRole)) {
		for i, name := range names {
			role := table[name]
			if role.canonical != "" {
				errs = append(errs, fmt.Errorf("%s::%d: %q is also an alias of %q; raw input and sensitive fields are never renamed", key, i, name, role.canonical))
				continue
			}
			set(&role)
			table[name] = role
		}
	}
	mark("input_hash::source_fields", c.InputHash.SourceFields, func(r *fieldRole) { r.input = true })
	if c.Redaction.Enabled {
		mark("redaction::attributes", c.Redaction.Attributes, func(r *fieldRole) { r.sensitive = true })
	}
	return table, errs
}

// role looks up what to do with an attribute key: the field table, then, for
// a key not in it, classify (gen_ai.prompt.0.content is raw input); both
// through the role table, one map lookup for a key seen before.
func (c *compiled) role(k string) (*fieldRole, bool) {
	return c.roleIn(k, false)
}

// keyRole is a key's role, noted by normalize so that removeAttributes, which
// walks the same attributes in the same order, need not look it up again.
type keyRole struct {
	key  string
	role *fieldRole
}

// noted returns the role of the i-th attribute, k, as normalize noted it,
// or as roleAt finds it when the attributes changed at i since.
func (c *compiled) noted(sc *scratch, i int, k string) *fieldRole {
	if i < len(sc.roles) && sc.roles[i].key == k {
		return sc.roles[i].role
	}
	role, _ := c.roleAt(&sc.removing, i, k)
	return role
}

// positionedRole is the key, and its role, that a pass over a record's
// attributes met at one position.
type positionedRole struct {
	key string
	knownRole
}

// roleAt is role for k, the i-th attribute a pass over a record meets.
// The records of a batch mostly carry the same keys in the same order, so
// the key the pass met at i in the previous record, kept in seen, usually
// answers with a string comparison instead of a map lookup.
func (c *compiled) roleAt(seen *[]positionedRole, i int, k string) (*fieldRole, bool) {
	if i < len(*seen) && (*seen)[i].role != nil && (*seen)[i].key == k {
		return (*seen)[i].role, (*seen)[i].known
	}
	role, known := c.role(k)
	for len(*seen) <= i {
		*seen = append(*seen, positionedRole{}) // a position noted answered: matches nothing
	}
	(*seen)[i] = positionedRole{k, knownRole{role, known}}
	return role, known
}

// roleIn is role for a key of a span event, which may carry content (isContentEvent).
func (c *compiled) roleIn(k string, contentEvent bool) (*fieldRole, bool) {
	if contentEvent {
		if _, configured := c.fields[k]; !configured {
			role := c.classify(k, true)
			return role, role.input || role.sensitive
		}
	}
	return c.roles.get(k, func() *fieldRole { return c.classify(k, false) })
}

// normalize copies aliases to canonical names, converts numeric fields,
// normalizes stage and model_ver and sanitizes string values. Raw input and
// sensitive attributes are only noted in sc, for hashInput and redact. The
// aliases that do not stay on the record (all but gen_ai.*) leave it in the
// same pass, their values moved to sc, so that their canonical names take
// their room: the attributes need not grow, and the values need not be copied.
func (c *compiled) normalize(attrs pcommon.Map, sc *scratch, t *tally) {
	i := -1
	attrs.RemoveIf(func(k string, v pcommon.Value) bool {
		i++
		role, known := c.roleAt(&sc.normalizing, i, k)
		switch {
		case role.input:
			sc.roles = append(sc.roles, keyRole{k, role})
			sc.inputs = append(sc.inputs, k)
			return false // hashed whole before anything else touches it
		case role.sensitive:
			sc.secrets = append(sc.secrets, k)
		}
		if v.Type() == pcommon.ValueTypeStr {
			c.sanitize(v, t, k != golden.ReqID && role.canonical != golden.ReqID)
		}
		if role.numeric || !known && golden.IsResourceUsage(k) {
			sc.numeric = append(sc.numeric, k)
		}
		if role.canonical == "" || role.keep {
			sc.roles = append(sc.roles, keyRole{k, role})
			if role.canonical != "" {
				sc.noteAlias(aliasValue{keyRole: keyRole{k, role}})
			}
			return false
		}
		if !slices.ContainsFunc(sc.aliases, func(a aliasValue) bool { return a.key == k }) { // of a key written twice, the first, as Get finds it
			sc.noteAlias(aliasValue{keyRole{k, role}, sc.hold(v)})
		}
		return true
	})
	c.copyAliases(attrs, sc, t)
	rejectLongReqID(attrs, sc, t)
	deriveTPOT(attrs)
	for _, k := range sc.numeric {
		if canonical := c.fields[k].canonical; canonical != "" {
			k = canonical
		}
		if v, ok := attrs.Get(k); ok && !coerceNumber(v) {
			sc.failures = append(sc.failures, failure{reasonInvalid, boundedFieldName(k)})
		}
	}
	if v, ok := attrs.Get(golden.Stage); ok && v.Type() == pcommon.ValueTypeStr {
		if s := sc.normalizedStage(v.Str()); s != v.Str() {
			v.SetStr(s)
		}
	}
	if v, ok := attrs.Get(golden.ModelVer); ok && v.Type() == pcommon.ValueTypeStr {
		if model := c.modelName(v.Str()); model != v.Str() {
			v.SetStr(model)
		}
	}
}

// maxConflicts bounds the golden.conflicts entries one record keeps; the
// conflicts beyond it are counted (sanitized, too_many_conflicts) as well
// as in alias_conflicts.
const maxConflicts = 8

// copyAliases copies alias values to their canonical names; a canonical name
// already present wins over its aliases, and of several aliases of one name a
// preferred one (golden.Alias.Preferred) wins, then the first in name order,
// whatever order the attributes came in. The aliases that lost are checked
// for conflicts (noteConflicts).
func (c *compiled) copyAliases(attrs pcommon.Map, sc *scratch, t *tally) {
	// gen_ai.* aliases stay on the record beside their copies: room for
	// every copy, made at once (a no-op when the removed aliases left it).
	attrs.EnsureCapacity(attrs.Len() + len(sc.preferred) + len(sc.aliases) + addedToEveryRecord)
	var lost []aliasValue
	for i, aliases := range [2][]aliasValue{sc.preferred, sc.aliases} {
		for _, alias := range aliases {
			if i == 1 && alias.role.convert.Preferred {
				continue // seen in the first pass
			}
			if _, exists := attrs.Get(alias.role.canonical); !exists {
				putConverted(attrs, alias.role, alias.current(attrs))
			} else if !alias.role.keep { // a gen_ai.* source stays on the record: nothing is lost
				lost = append(lost, alias)
			}
		}
	}
	if len(lost) > 0 {
		c.noteConflicts(attrs, lost, sc, t)
	}
}

// aliasValue is an alias attribute and, unless it stays on the record
// (gen_ai.*), its value, moved out of the record.
type aliasValue struct {
	keyRole
	moved pcommon.Value
}

// current returns the alias's value.
func (a aliasValue) current(attrs pcommon.Map) pcommon.Value {
	if a.role.keep {
		v, _ := attrs.Get(a.key)
		return v
	}
	return a.moved
}

// noteAlias adds a to the record's aliases, which it keeps in key order.
func (sc *scratch) noteAlias(a aliasValue) {
	sc.aliases = insertByKey(sc.aliases, a)
	if a.role.convert.Preferred {
		sc.preferred = insertByKey(sc.preferred, a)
	}
}

// insertByKey inserts a into aliases, in key order. A record has a few
// aliases: finding the place from the end costs less than sorting them.
func insertByKey(aliases []aliasValue, a aliasValue) []aliasValue {
	i := len(aliases)
	for i > 0 && a.key < aliases[i-1].key {
		i--
	}
	return slices.Insert(aliases, i, a)
}

// hold moves v into one of the scratch's values, reused from record to record.
func (sc *scratch) hold(v pcommon.Value) pcommon.Value {
	if sc.holding == len(sc.held) {
		sc.held = append(sc.held, pcommon.NewValueEmpty())
	}
	held := sc.held[sc.holding]
	sc.holding++
	v.MoveTo(held)
	return held
}

// noteConflicts keeps visible the values of the aliases in lost that differ
// from the value their golden field ended with: each is counted by golden
// field, and the first maxConflicts are listed in golden.conflicts as
// "<golden field> <alias>=<value>", the value redacted as the alias's would be.
// Equal values (after the alias's conversion) are no conflict.
func (c *compiled) noteConflicts(attrs pcommon.Map, lost []aliasValue, sc *scratch, t *tally) {
	room := maxConflicts
	existing, hasList := attrs.Get(golden.ConflictsAttr) // from an upstream goldenfield
	if hasList = hasList && existing.Type() == pcommon.ValueTypeSlice; hasList {
		room -= existing.Slice().Len()
	}
	for _, alias := range lost {
		role := alias.role
		v := alias.current(attrs)
		w, _ := attrs.Get(role.canonical)
		if c.sameValue(role, v, w) {
			continue
		}
		t.conflict(role.canonical)
		if len(sc.conflicts) >= room {
			t.sanitized[issueTooManyConflicts]++
			continue
		}
		sc.conflicts = append(sc.conflicts, role.canonical+" "+alias.key+"="+c.conflictValue(alias.key, role, v, t))
	}
	if len(sc.conflicts) == 0 {
		return
	}
	var list pcommon.Slice
	if hasList {
		existing, _ = attrs.Get(golden.ConflictsAttr)
		list = existing.Slice()
	} else {
		list = attrs.PutEmptySlice(golden.ConflictsAttr)
	}
	for _, entry := range sc.conflicts {
		list.AppendEmpty().SetStr(entry)
	}
}

// sameValue reports whether an alias's value, converted as it would have
// been had it won, equals the value its golden field has: as numbers for a
// numeric field (2.34 s of gen_ai.latency.e2e is 2340 ms, "2340" is 2340),
// else as text, trimmed of the alias's prefixes and, for model_ver, mapped
// through normalize::models.
func (c *compiled) sameValue(role *fieldRole, alias, canonical pcommon.Value) bool {
	if role.numeric {
		a, ok1 := numberOf(alias)
		b, ok2 := numberOf(canonical)
		if ok1 && ok2 {
			if role.convert.Scale != 0 && alias.Type() != pcommon.ValueTypeStr {
				a *= role.convert.Scale
			}
			return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
		}
	}
	a, b := alias.AsString(), canonical.AsString()
	if alias.Type() == pcommon.ValueTypeStr {
		a = trimPrefix(role.convert, a)
	}
	if role.canonical == golden.ModelVer {
		a, b = c.modelName(a), c.modelName(b)
	}
	return a == b
}

// modelName maps a model_ver through normalize::models.
func (c *compiled) modelName(s string) string {
	if model, ok := c.models[strings.TrimSpace(s)]; ok {
		return model
	}
	return s
}

// numberOf reads v as a number, as coerceNumber would, without changing it.
func numberOf(v pcommon.Value) (float64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	case pcommon.ValueTypeDouble:
		return v.Double(), true
	case pcommon.ValueTypeStr:
		return finiteFloat(strings.TrimSpace(v.Str()))
	}
	return 0, false
}

// finiteFloat parses s as a number that is neither infinite nor NaN.
func finiteFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
}

// conflictValue is the text of an alias's losing value in golden.conflicts.
// With redaction on, the value of an alias of a raw input or sensitive field,
// or of an alias whose own name is content-bearing, is [REDACTED] (counted as
// that field's would be), and a map or list is redacted inside first; body
// patterns are masked later, with the other attributes (removeAttributes).
// It is cut at max_value_bytes.
func (c *compiled) conflictValue(alias string, role *fieldRole, v pcommon.Value, t *tally) string {
	if c.cfg.Redaction.Enabled {
		secret, _ := c.role(role.canonical)
		if !secret.input && !secret.sensitive {
			secret = c.classify(alias, false)
		}
		if secret.input || secret.sensitive {
			t.redacted(targetAttribute, secret)
			return redactedValue
		}
		if v.Type() == pcommon.ValueTypeMap || v.Type() == pcommon.ValueTypeSlice {
			scrubbed := pcommon.NewValueEmpty()
			v.CopyTo(scrubbed)
			c.scrubValue(scrubbed, alias, false, targetAttribute, t)
			v = scrubbed
		}
	}
	return extract.TruncateUTF8(v.AsString(), c.cfg.Normalize.MaxValueBytes)
}

// putConverted puts an alias's value under its canonical name, scaled or
// trimmed as the convention says. A value that cannot be scaled is copied
// as it is, for validation to report; the value of an alias that goes is
// moved, not copied.
func putConverted(attrs pcommon.Map, role *fieldRole, v pcommon.Value) {
	convert := role.convert
	switch {
	case convert.Scale != 0 && v.Type() == pcommon.ValueTypeInt:
		attrs.PutDouble(role.canonical, float64(v.Int())*convert.Scale)
	case convert.Scale != 0 && v.Type() == pcommon.ValueTypeDouble:
		attrs.PutDouble(role.canonical, v.Double()*convert.Scale)
	case len(convert.TrimPrefix) > 0 && v.Type() == pcommon.ValueTypeStr:
		attrs.PutStr(role.canonical, trimPrefix(convert, v.Str()))
	case role.keep:
		copyValue(attrs, role.canonical, v)
	default:
		v.MoveTo(attrs.PutEmpty(role.canonical))
	}
}

// trimPrefix cuts the first of the convention's prefixes that s starts with,
// unless nothing would be left.
func trimPrefix(convert golden.Alias, s string) string {
	for _, prefix := range convert.TrimPrefix {
		if trimmed, ok := strings.CutPrefix(s, prefix); ok && trimmed != "" {
			return trimmed
		}
	}
	return s
}

// deriveTPOT adds the time per output token to a generation that reports
// its latency, time to first token and output tokens but not that.
func deriveTPOT(attrs pcommon.Map) {
	ttft, ok := attrs.Get(golden.TTFTMs) // first: most records have none
	if !ok {
		return
	}
	if _, ok := attrs.Get(golden.TPOTMs); ok {
		return
	}
	latency, ok1 := attrs.Get(golden.LatencyMs)
	tokens, ok2 := attrs.Get(golden.OutputTokens)
	if !ok1 || !ok2 || !coerceNumber(latency) || !coerceNumber(ttft) || !coerceNumber(tokens) {
		return
	}
	if tpot, ok := golden.TPOT(asFloat(latency), asFloat(ttft), int64(asFloat(tokens))); ok {
		attrs.PutDouble(golden.TPOTMs, tpot)
	}
}

func asFloat(v pcommon.Value) float64 {
	if v.Type() == pcommon.ValueTypeInt {
		return float64(v.Int())
	}
	return v.Double()
}

// copyValue puts a copy of v under key. v must not be read after attrs changes,
// so scalars are read out first.
func copyValue(attrs pcommon.Map, key string, v pcommon.Value) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		attrs.PutStr(key, v.Str())
	case pcommon.ValueTypeInt:
		attrs.PutInt(key, v.Int())
	case pcommon.ValueTypeDouble:
		attrs.PutDouble(key, v.Double())
	case pcommon.ValueTypeBool:
		attrs.PutBool(key, v.Bool())
	default:
		tmp := pcommon.NewValueEmpty()
		v.CopyTo(tmp)
		tmp.CopyTo(attrs.PutEmpty(key))
	}
}

// coerceNumber turns a numeric string into an int or double in place and
// reports whether v now holds a number.
func coerceNumber(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeInt, pcommon.ValueTypeDouble:
		return true
	case pcommon.ValueTypeStr:
		s := strings.TrimSpace(v.Str())
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			v.SetInt(n)
			return true
		}
		if f, ok := finiteFloat(s); ok {
			v.SetDouble(f)
			return true
		}
	}
	return false
}

// boundedFieldName keeps telemetry cardinality bounded: resource_usage fields
// come from the data, so they are reported under one name.
func boundedFieldName(k string) string {
	if golden.IsResourceUsage(k) {
		return golden.ResourceUsagePrefix + "*"
	}
	return k
}

// normalizedStage is normalizeStage, remembered for the batch for names
// that are not already paths.
func (sc *scratch) normalizedStage(s string) string {
	if isStagePath(s) {
		return s
	}
	return sc.stages.get(s, normalizeStage)
}

// normalizeStage lowercases a stage and makes it a /-separated path:
// "Model.Forward", "model:forward" and " model / forward " become "model/forward".
func normalizeStage(s string) string {
	if isStagePath(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	slash := false
	for _, r := range s {
		if r == '/' || r == '.' || r == ':' || r == '\\' || unicode.IsSpace(r) {
			slash = b.Len() > 0
			continue
		}
		if slash {
			b.WriteByte('/')
			slash = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// rejectLongReqID removes a req_id longer than golden.MaxReqIDBytes: an id is
// never cut, since two long ids that share a prefix would become one request.
// The record is tagged invalid for req_id, and counted.
func rejectLongReqID(attrs pcommon.Map, sc *scratch, t *tally) {
	v, ok := attrs.Get(golden.ReqID)
	if !ok || v.Type() != pcommon.ValueTypeStr || len(v.Str()) <= golden.MaxReqIDBytes {
		return
	}
	attrs.Remove(golden.ReqID)
	sc.failures = append(sc.failures, failure{reasonInvalid, golden.ReqID})
	t.sanitized[issueIDTooLong]++
}

// sanitize replaces invalid UTF-8 and truncates values over the size limit.
func (c *compiled) sanitize(v pcommon.Value, t *tally, cut bool) {
	s := v.Str()
	fixed := s
	if !utf8.ValidString(fixed) {
		fixed = strings.ToValidUTF8(fixed, "\uFFFD")
		t.sanitized[issueInvalidUTF8]++
	}
	if cut && len(fixed) > c.cfg.Normalize.MaxValueBytes {
		fixed = extract.TruncateUTF8(fixed, c.cfg.Normalize.MaxValueBytes)
		t.sanitized[issueValueTruncated]++
	}
	if fixed != s {
		v.SetStr(fixed)
	}
}
