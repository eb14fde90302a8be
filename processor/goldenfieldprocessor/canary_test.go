package goldenfieldprocessor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const canary = "CANARY7f3a"

// contentKeys are where instrumentations put prompts and completions.
var contentKeys = []string{
	"prompt", "gen_ai.prompt", "gen_ai.prompt.0.content", "gen_ai.completion.0.content",
	"llm.input_messages.0.message.content", "llm.output_messages.0.message.content",
	"input.value", "output.value", "llm.prompts", "messages", "gen_ai.input.messages",
}

// piiValues are values the body patterns must mask wherever a string goes.
var piiValues = []string{
	"mail canary.pii@example.com now", "call (415) 555-0132", "call +1 415-555-0132", "call +44 20 7946 0958",
	"call +49 30 12345678", "call +33 1 23 45 67 89", "key sk-abcdefghijklmnopqrstuvwx", "auth Bearer abcdefghijklmnopqrstuvwxyz0123",
	"aws AKIAABCDEFGHIJKLMNOP", "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789",
}

// survivors are plain fields put next to every canary; they must come out.
func putSurvivors(m pcommon.Map) {
	m.PutStr("gen_ai.prompt.0.role", "user")
	m.PutInt("message_count", 3)
	m.PutStr("keep.me", "SURVIVOR")
}

var survivorKeys = []string{"gen_ai.prompt.0.role", "message_count", "SURVIVOR"}

// attrPlacements put key: value in a map of attributes, flat or nested.
var attrPlacements = map[string]func(m pcommon.Map, key, value string){
	"flat": func(m pcommon.Map, key, value string) {
		putSurvivors(m)
		m.PutStr(key, value)
	},
	"list": func(m pcommon.Map, key, value string) {
		putSurvivors(m)
		m.PutEmptySlice(key).AppendEmpty().SetStr(value)
	},
	"map 9 deep": func(m pcommon.Map, key, value string) {
		for _, k := range []string{"request", "a", "b", "c", "d", "e", "f", "g", "h"} {
			m = m.PutEmptyMap(k)
		}
		putSurvivors(m)
		m.PutStr(key, value)
	},
	"list of maps": func(m pcommon.Map, key, value string) {
		inner := m.PutEmptySlice("tools").AppendEmpty().SetEmptyMap()
		putSurvivors(inner)
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
		putSurvivors(span.Attributes())
	},
	"status message": func(span ptrace.Span, key, value string) {
		span.Status().SetMessage(fmt.Sprintf("SURVIVOR message_count=3 gen_ai.prompt.0.role=user rejected %s=%q", key, value))
		putSurvivors(span.Attributes())
	},
}

// A payload with one record, whose parts place puts the canary in.
type logParts struct {
	rl plog.ResourceLogs
	sl plog.ScopeLogs
	lr plog.LogRecord
}

type spanParts struct {
	rs   ptrace.ResourceSpans
	ss   ptrace.ScopeSpans
	span ptrace.Span
}

func newLogParts() (plog.Logs, logParts) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "canary")
	sl := rl.ScopeLogs().AppendEmpty()
	return ld, logParts{rl, sl, sl.LogRecords().AppendEmpty()}
}

func newSpanParts() (ptrace.Traces, spanParts) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "canary")
	ss := rs.ScopeSpans().AppendEmpty()
	span := ss.Spans().AppendEmpty()
	span.SetName("chat")
	return td, spanParts{rs, ss, span}
}

type placementCase struct {
	name  string
	logs  func(logParts, string, string)
	spans func(spanParts, string, string)
}

// place makes a log payload and a span payload with key: value where pl puts it.
func (pl placementCase) place(key, value string) (plog.Logs, logParts, ptrace.Traces) {
	ld, lp := newLogParts()
	td, sp := newSpanParts()
	if pl.logs != nil {
		pl.logs(lp, key, value)
	}
	if pl.spans != nil {
		pl.spans(sp, key, value)
	}
	return ld, lp, td
}

// placements is, in name order, every place a value can travel in: record, resource and scope
// attributes by every attribute placement, log bodies, and span parts.
func placements() []placementCase {
	var out []placementCase
	for name, put := range attrPlacements {
		out = append(out,
			placementCase{"record attributes " + name,
				func(p logParts, k, v string) { put(p.lr.Attributes(), k, v) },
				func(p spanParts, k, v string) { put(p.span.Attributes(), k, v) }},
			placementCase{"resource attributes " + name,
				func(p logParts, k, v string) { put(p.rl.Resource().Attributes(), k, v) },
				func(p spanParts, k, v string) { put(p.rs.Resource().Attributes(), k, v) }},
			placementCase{"scope attributes " + name,
				func(p logParts, k, v string) { put(p.sl.Scope().Attributes(), k, v) },
				func(p spanParts, k, v string) { put(p.ss.Scope().Attributes(), k, v) }})
	}
	for name, put := range bodyPlacements {
		out = append(out, placementCase{name: "body " + name, logs: func(p logParts, k, v string) { put(p.lr, k, v) }})
	}
	for name, put := range spanPlacements {
		out = append(out, placementCase{name: name, spans: func(p spanParts, k, v string) { put(p.span, k, v) }})
	}
	slices.SortFunc(out, func(a, b placementCase) int { return strings.Compare(a.name, b.name) })
	return out
}

// runPayloads sends one log payload and one span payload through a processor
// built from cfg and returns both, marshalled whole as OTLP JSON.
func runPayloads(t testing.TB, cfg *Config, ld plog.Logs, td ptrace.Traces) (logsJSON, tracesJSON string) {
	t.Helper()
	ctx := context.Background()
	logsSink, tracesSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	lp, err := NewFactory().CreateLogs(ctx, settings(nil), cfg, logsSink)
	require.NoError(t, err)
	tp, err := NewFactory().CreateTraces(ctx, settings(nil), cfg, tracesSink)
	require.NoError(t, err)
	require.NoError(t, lp.ConsumeLogs(ctx, ld))
	require.NoError(t, tp.ConsumeTraces(ctx, td))
	require.NoError(t, lp.Shutdown(ctx))
	require.NoError(t, tp.Shutdown(ctx))
	for _, out := range logsSink.AllLogs() {
		b, err := (&plog.JSONMarshaler{}).MarshalLogs(out)
		require.NoError(t, err)
		logsJSON += string(b)
	}
	for _, out := range tracesSink.AllTraces() {
		b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(out)
		require.NoError(t, err)
		tracesJSON += string(b)
	}
	return logsJSON, tracesJSON
}

// No prompt or completion leaves the processor, wherever a log record or span
// carries it, and the plain fields next to it do.
func TestCanaryContentNeverLeaves(t *testing.T) {
	for _, mode := range []RedactionMode{RedactionRemove, RedactionMask} {
		cfg := defaultConfig()
		cfg.Redaction.Mode = mode
		for _, pl := range placements() {
			for _, key := range contentKeys {
				t.Run(fmt.Sprintf("%s/%s/%s", mode, pl.name, key), func(t *testing.T) {
					assertNoCanary(t, cfg, pl, key, "say "+canary+" please", canary)
				})
			}
		}
	}
}

// The body patterns mask PII in every string placement, under a plain key.
func TestCanaryPIINeverLeaves(t *testing.T) {
	for _, pl := range placements() {
		for _, pii := range piiValues {
			t.Run(pl.name+"/"+pii, func(t *testing.T) {
				secret := pii[strings.IndexByte(pii, ' ')+1:]
				assertNoCanary(t, defaultConfig(), pl, "note", pii, secret)
			})
		}
	}
}

func assertNoCanary(t *testing.T, cfg *Config, pl placementCase, key, value, secret string) {
	t.Helper()
	ld, _, td := pl.place(key, value)
	logsJSON, tracesJSON := runPayloads(t, cfg, ld, td)
	for signal, out := range map[string]string{"logs": logsJSON, "traces": tracesJSON} {
		require.NotContains(t, out, secret, "%s leaked in %s", secret, signal)
		require.NotEmpty(t, out)
	}
	for _, placed := range []struct {
		used bool
		out  string
	}{{pl.logs != nil, logsJSON}, {pl.spans != nil, tracesJSON}} {
		if !placed.used {
			continue
		}
		for _, k := range survivorKeys {
			assert.Contains(t, placed.out, k)
		}
	}
}

// A span event that says it carries content has its content redacted, under
// whatever key the event uses for it; its plain attributes stay.
func TestCanaryContentEvents(t *testing.T) {
	events := map[string]string{
		"gen_ai.content.prompt": "gen_ai.prompt", "gen_ai.content.completion": "gen_ai.completion",
		"gen_ai.user.message": "content", "gen_ai.system.message": "message", "gen_ai.assistant.message": "message",
		"gen_ai.tool.message": "content", "gen_ai.choice": "message",
	}
	for name, key := range events {
		t.Run(name, func(t *testing.T) {
			td, sp := newSpanParts()
			e := sp.span.Events().AppendEmpty()
			e.SetName(name)
			e.Attributes().PutStr("gen_ai.system", "openai")
			e.Attributes().PutInt("index", 0)
			e.Attributes().PutStr(key, canary)
			e.Attributes().PutEmptyMap("message").PutStr("content", canary)
			_, out := runPayloads(t, defaultConfig(), plog.NewLogs(), td)
			require.NotContains(t, out, canary)
			assert.Contains(t, out, "openai")
			assert.Contains(t, out, name)
		})
	}
	t.Run("message outside a content event is kept", func(t *testing.T) {
		td, sp := newSpanParts()
		e := sp.span.Events().AppendEmpty()
		e.SetName("exception")
		e.Attributes().PutStr("exception.message", "boom")
		_, out := runPayloads(t, defaultConfig(), plog.NewLogs(), td)
		assert.Contains(t, out, "boom")
	})
}
