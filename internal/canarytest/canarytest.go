// Package canarytest places canaries, values that must never leave the
// collector, everywhere log records and spans can carry them: under the keys
// where LLM instrumentations put prompts and completions, and PII under a
// plain key, in attributes at any depth, bodies, span events, links, names and
// status messages. goldenfield's unit tests and the e2e probe suite share it,
// so both hold the collector to the same placements.
package canarytest

import (
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// ContentKeys are where instrumentations put prompts and completions.
var ContentKeys = []string{
	"prompt", "gen_ai.prompt", "gen_ai.prompt.0.content", "gen_ai.completion.0.content",
	"llm.input_messages.0.message.content", "llm.output_messages.0.message.content",
	"input.value", "output.value", "llm.prompts", "messages", "gen_ai.input.messages",
}

// PIIValues are values the body patterns must mask wherever a string goes;
// PIISecret tells the part of each that must not come out.
var PIIValues = []string{
	"mail canary.pii@example.com now", "call (415) 555-0132", "call +1 415-555-0132", "call +44 20 7946 0958",
	"call +49 30 12345678", "call +33 1 23 45 67 89", "key sk-abcdefghijklmnopqrstuvwx", "auth Bearer abcdefghijklmnopqrstuvwxyz0123",
	"aws AKIAABCDEFGHIJKLMNOP", "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789",
}

// PIISecret is the PII in one of PIIValues: what follows its first word.
func PIISecret(value string) string {
	secret := value[strings.IndexByte(value, ' ')+1:]
	if word, _, ok := strings.Cut(secret, " now"); ok {
		return word
	}
	return secret
}

// ContentEvents are the span events the GenAI conventions put content in,
// each with a key that carries it.
var ContentEvents = map[string]string{
	"gen_ai.content.prompt": "gen_ai.prompt", "gen_ai.content.completion": "gen_ai.completion",
	"gen_ai.user.message": "content", "gen_ai.system.message": "message", "gen_ai.assistant.message": "message",
	"gen_ai.tool.message": "content", "gen_ai.choice": "message",
}

// PutSurvivors puts plain fields next to a canary; SurvivorKeys must come
// out where they went in.
func PutSurvivors(m pcommon.Map) {
	m.PutStr("gen_ai.prompt.0.role", "user")
	m.PutInt("message_count", 3)
	m.PutStr("keep.me", "SURVIVOR")
}

// SurvivorKeys are what of PutSurvivors' fields must be found in the output.
var SurvivorKeys = []string{"gen_ai.prompt.0.role", "message_count", "SURVIVOR"}

// attrPlacements put key: value in a map of attributes, flat or nested.
var attrPlacements = map[string]func(m pcommon.Map, key, value string){
	"flat": func(m pcommon.Map, key, value string) {
		PutSurvivors(m)
		m.PutStr(key, value)
	},
	"list": func(m pcommon.Map, key, value string) {
		PutSurvivors(m)
		m.PutEmptySlice(key).AppendEmpty().SetStr(value)
	},
	"map 9 deep": func(m pcommon.Map, key, value string) {
		for _, k := range []string{"request", "a", "b", "c", "d", "e", "f", "g", "h"} {
			m = m.PutEmptyMap(k)
		}
		PutSurvivors(m)
		m.PutStr(key, value)
	},
	"list of maps": func(m pcommon.Map, key, value string) {
		inner := m.PutEmptySlice("tools").AppendEmpty().SetEmptyMap()
		PutSurvivors(inner)
		inner.PutStr(key, value)
	},
}

// bodyPlacements put key: value in a log body.
var bodyPlacements = map[string]func(lr plog.LogRecord, key, value string){
	"JSON": func(lr plog.LogRecord, key, value string) {
		lr.Body().SetStr(fmt.Sprintf(`{"keep.me":"SURVIVOR","message_count":3,"gen_ai.prompt.0.role":"user",%q:%q}`, key, value))
	},
	"JSON 9 deep": func(lr plog.LogRecord, key, value string) {
		lr.Body().SetStr(fmt.Sprintf(`{"keep.me":"SURVIVOR","message_count":3,"gen_ai.prompt.0.role":"user","a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{%q:%q}}}}}}}}}`, key, value))
	},
	"JSON list of objects": func(lr plog.LogRecord, key, value string) {
		lr.Body().SetStr(fmt.Sprintf(`{"keep.me":"SURVIVOR","message_count":3,"gen_ai.prompt.0.role":"user","items":[{"n":1},{%q:%q}]}`, key, value))
	},
	"malformed JSON": func(lr plog.LogRecord, key, value string) {
		lr.Body().SetStr(fmt.Sprintf(`{"keep.me":"SURVIVOR","message_count":3,"gen_ai.prompt.0.role":"user",%q:%q,`, key, value))
	},
	"logfmt": func(lr plog.LogRecord, key, value string) {
		lr.Body().SetStr(fmt.Sprintf(`keep.me=SURVIVOR message_count=3 gen_ai.prompt.0.role=user %s=%q`, key, value))
	},
	"structured 9 deep": func(lr plog.LogRecord, key, value string) {
		attrPlacements["map 9 deep"](lr.Body().SetEmptyMap(), key, value)
	},
	"structured list of maps": func(lr plog.LogRecord, key, value string) {
		attrPlacements["list of maps"](lr.Body().SetEmptyMap(), key, value)
	},
}

// spanPlacements put key: value in a span's parts other than its own attributes.
var spanPlacements = map[string]func(span ptrace.Span, key, value string){
	"event": func(span ptrace.Span, key, value string) {
		attrPlacements["flat"](span.Events().AppendEmpty().Attributes(), key, value)
	},
	"event nested": func(span ptrace.Span, key, value string) {
		attrPlacements["list of maps"](span.Events().AppendEmpty().Attributes(), key, value)
	},
	"link": func(span ptrace.Span, key, value string) {
		attrPlacements["map 9 deep"](span.Links().AppendEmpty().Attributes(), key, value)
	},
	"span name": func(span ptrace.Span, key, value string) {
		span.SetName(fmt.Sprintf("SURVIVOR chat message_count=3 gen_ai.prompt.0.role=user %s: %q", key, value))
		PutSurvivors(span.Attributes())
	},
	"status message": func(span ptrace.Span, key, value string) {
		span.Status().SetMessage(fmt.Sprintf("SURVIVOR message_count=3 gen_ai.prompt.0.role=user rejected %s=%q", key, value))
		PutSurvivors(span.Attributes())
	},
}

// LogParts are the parts of a payload of one log record.
type LogParts struct {
	Resource plog.ResourceLogs
	Scope    plog.ScopeLogs
	Record   plog.LogRecord
}

// SpanParts are the parts of a payload of one span.
type SpanParts struct {
	Resource ptrace.ResourceSpans
	Scope    ptrace.ScopeSpans
	Span     ptrace.Span
}

// NewLogParts makes a payload of one log record of the service "canary".
func NewLogParts() (plog.Logs, LogParts) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "canary")
	sl := rl.ScopeLogs().AppendEmpty()
	return ld, LogParts{rl, sl, sl.LogRecords().AppendEmpty()}
}

// NewSpanParts makes a payload of one span, "chat", of the service "canary".
func NewSpanParts() (ptrace.Traces, SpanParts) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "canary")
	ss := rs.ScopeSpans().AppendEmpty()
	span := ss.Spans().AppendEmpty()
	span.SetName("chat")
	return td, SpanParts{rs, ss, span}
}

// Placement is one place a value can travel in, in a log record, a span or both.
type Placement struct {
	Name  string
	Logs  func(LogParts, string, string)
	Spans func(SpanParts, string, string)
}

// Place makes a log payload and a span payload with key: value where pl puts it.
func (pl Placement) Place(key, value string) (plog.Logs, LogParts, ptrace.Traces, SpanParts) {
	ld, lp := NewLogParts()
	td, sp := NewSpanParts()
	if pl.Logs != nil {
		pl.Logs(lp, key, value)
	}
	if pl.Spans != nil {
		pl.Spans(sp, key, value)
	}
	return ld, lp, td, sp
}

// Placements is, in name order, every place a value can travel in: record,
// resource and scope attributes by every attribute placement, log bodies, and
// span parts.
func Placements() []Placement {
	var out []Placement
	for name, put := range attrPlacements {
		out = append(out,
			Placement{"record attributes " + name,
				func(p LogParts, k, v string) { put(p.Record.Attributes(), k, v) },
				func(p SpanParts, k, v string) { put(p.Span.Attributes(), k, v) }},
			Placement{"resource attributes " + name,
				func(p LogParts, k, v string) { put(p.Resource.Resource().Attributes(), k, v) },
				func(p SpanParts, k, v string) { put(p.Resource.Resource().Attributes(), k, v) }},
			Placement{"scope attributes " + name,
				func(p LogParts, k, v string) { put(p.Scope.Scope().Attributes(), k, v) },
				func(p SpanParts, k, v string) { put(p.Scope.Scope().Attributes(), k, v) }})
	}
	for name, put := range bodyPlacements {
		out = append(out, Placement{Name: "body " + name, Logs: func(p LogParts, k, v string) { put(p.Record, k, v) }})
	}
	for name, put := range spanPlacements {
		out = append(out, Placement{Name: name, Spans: func(p SpanParts, k, v string) { put(p.Span, k, v) }})
	}
	slices.SortFunc(out, func(a, b Placement) int { return strings.Compare(a.Name, b.Name) })
	return out
}
