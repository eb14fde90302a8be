package reqidstitchprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/golden"
)

func staged(id, stage string, extra map[string]any) map[string]any {
	attrs := map[string]any{golden.ReqID: id, golden.Stage: stage}
	for k, v := range extra {
		attrs[k] = v
	}
	return attrs
}

// parents returns a record's causal.parents and causal.rules entries.
func parents(attrs pcommon.Map) (entries, rules []string) {
	for _, name := range []string{golden.CausalParents, golden.CausalRules} {
		v, ok := attrs.Get(name)
		if !ok {
			continue
		}
		var list []string
		for _, e := range v.Slice().AsRaw() {
			list = append(list, e.(string))
		}
		if name == golden.CausalParents {
			entries = list
		} else {
			rules = list
		}
	}
	return entries, rules
}

func TestCacheMissTriggersInference(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rootA))
	miss := rec{service: "cache", trace: traceID(1), span: spanID(1), at: t0.Add(10 * time.Millisecond), name: "cache miss", attrs: staged(reqA, "cache/miss", nil)}
	h.consumeLogs(logsOf(miss))
	missEvent := str(h.outLogs()[0].Attributes(), golden.EventID)

	forward := func(id string, span byte, at time.Duration, stage string) rec {
		return rec{service: "model", trace: traceID(1), span: spanID(span), parent: spanID(1), at: t0.Add(at), end: t0.Add(at + time.Second), name: stage, attrs: staged(id, stage, nil)}
	}
	h.consumeTraces(tracesOf(
		forward(reqA, 10, 300*time.Millisecond, "model/forward"),    // within 500 ms
		forward(reqA, 11, 510*time.Millisecond, "model/inference"),  // exactly at the window: 500 ms after
		forward(reqA, 12, 600*time.Millisecond, "model/forward"),    // too late
		forward(reqB, 13, 300*time.Millisecond, "model/forward"),    // another request
		forward(reqA, 14, 0, "model/forward"),                       // before the miss
		forward(reqA, 15, 300*time.Millisecond, "postproc/filter"),  // not inference
		forward(reqA, 16, 300*time.Millisecond, "model/forwarding"), // inference too: model/forward*
	))
	spans := h.outSpans()[1:]
	want := map[byte]bool{10: true, 11: true, 16: true}
	for _, s := range spans {
		entries, rules := parents(s.Attributes())
		if want[s.SpanID()[0]] {
			assert.Equal(t, []string{missEvent + ":triggered"}, entries, "span %v", s.SpanID())
			assert.Equal(t, []string{"cache_miss_trigger_inference"}, rules)
		} else {
			assert.Empty(t, entries, "span %v", s.SpanID())
		}
	}
	assert.Equal(t, int64(3), h.counter("processor_reqidstitch_rule_hits", "rule", "cache_miss_trigger_inference"))
	assert.Equal(t, int64(3), h.counter("processor_reqidstitch_rule_hits"))
}

func TestGPUOOMCausesTimeoutOnTheSameHostAndGPU(t *testing.T) {
	h := newHarness(t, nil)
	oom := func(host, gpu string, usage int64, at time.Duration) rec {
		return rec{service: "loom-gpu", host: host, at: t0.Add(at), name: "memory",
			attrs: map[string]any{"hw.gpu.memory.usage": usage, "hw.gpu.memory.limit": int64(100), golden.GPUID: gpu}}
	}
	slow := func(host, gpu string, latency float64, at time.Duration, span byte) rec {
		attrs := staged(reqA, "model/forward", map[string]any{golden.LatencyMs: latency})
		if gpu != "" {
			attrs[golden.GPUID] = gpu
		}
		return rec{service: "model", host: host, trace: traceID(1), span: spanID(span), parent: spanID(1), at: t0.Add(at), end: t0.Add(at + 4*time.Second), attrs: attrs}
	}
	h.consumeLogs(logsOf(oom("gpu-node-0", "0", 96, 0), oom("gpu-node-1", "0", 90, 0)))
	oomEvent := str(h.outLogs()[0].Attributes(), golden.EventID)
	h.consumeTraces(tracesOf(
		rootA,
		slow("gpu-node-0", "0", 4200, time.Second, 10),       // same host and GPU, within 5 s
		slow("gpu-node-0", "1", 4200, time.Second, 11),       // another GPU
		slow("gpu-node-0", "", 4200, time.Second, 12),        // names no GPU: the rule cannot join it
		slow("gpu-node-0", "0", 800, time.Second, 13),        // not slow
		slow("gpu-node-0", "0", 4200, 6*time.Second, 14),     // too late
		slow("gpu-node-1", "0", 4200, time.Second, 15),       // that GPU never reached 95%
		slow("gpu-node-0", "0", 3000.5, 2*time.Second, 16),   // just above 3000 ms
		slow("gpu-node-0", "0", 4200, -time.Millisecond, 17), // before the OOM
	))
	for _, s := range h.outSpans()[1:] {
		entries, _ := parents(s.Attributes())
		if id := s.SpanID()[0]; id == 10 || id == 16 {
			assert.Equal(t, []string{oomEvent + ":caused_timeout"}, entries, "span %d", id)
		} else {
			assert.Empty(t, entries, "span %d", id)
		}
	}
	assert.Equal(t, int64(2), h.counter("processor_reqidstitch_rule_hits", "rule", "gpu_oom_cause_timeout"))
}

func TestRetryAndFallbackRules(t *testing.T) {
	h := newHarness(t, nil)
	h.consumeTraces(tracesOf(rootA))
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	h.consumeLogs(logsOf(
		rec{service: "gateway", trace: traceID(1), at: at(0), name: "upstream failed", attrs: staged(reqA, "model/forward", map[string]any{"error.type": "timeout"})},
		rec{service: "gateway", trace: traceID(1), at: at(time.Second), name: "retrying", attrs: staged(reqA, "model/forward", map[string]any{"retry.attempt": 1})},
		rec{service: "gateway", trace: traceID(1), at: at(2 * time.Second), name: "fallback", attrs: staged(reqA, "model/fallback", nil)},
		rec{service: "gateway", trace: traceID(1), at: at(2 * time.Second), name: "first try", attrs: staged(reqA, "model/forward", map[string]any{"retry.attempt": 0})},
	))
	logs := h.outLogs()
	require.Len(t, logs, 4)
	failure := str(logs[0].Attributes(), golden.EventID)
	entries, rules := parents(logs[1].Attributes())
	assert.Equal(t, []string{failure + ":retry_of"}, entries)
	assert.Equal(t, []string{"retry_of"}, rules)
	entries, _ = parents(logs[2].Attributes())
	assert.Equal(t, []string{failure + ":fallback"}, entries)
	entries, _ = parents(logs[3].Attributes())
	assert.Empty(t, entries)
	entries, _ = parents(logs[0].Attributes())
	assert.Empty(t, entries, "a record is never its own cause")
}

func TestRulesAreIdempotentAcrossTiers(t *testing.T) {
	h := newHarness(t, trustUpstream)
	h.consumeTraces(tracesOf(rootA))
	h.consumeLogs(logsOf(rec{service: "cache", trace: traceID(1), at: t0, name: "miss", attrs: staged(reqA, "cache/miss", nil)}))
	fwd := rec{service: "model", trace: traceID(1), span: spanID(9), parent: spanID(1), at: t0.Add(time.Millisecond), end: t0.Add(time.Second), attrs: staged(reqA, "model/forward", nil)}
	h.consumeTraces(tracesOf(fwd))
	// The same output arrives again (a retry upstream, or a second tier with the same rule).
	td := ptrace.NewTraces()
	h.spanOut.AllTraces()[1].CopyTo(td)
	h.consumeTraces(td)
	entries, rules := parents(h.outSpans()[2].Attributes())
	assert.Len(t, entries, 1)
	assert.Len(t, rules, 1)
	assert.Equal(t, int64(1), h.counter("processor_reqidstitch_rule_hits"))
}

func TestCustomRulesAndKeyBounds(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.MaxRuleKeys = 1
		c.Rules = []RuleConfig{{
			Name:     "lora_load_then_slow",
			From:     `name == "lora/load"`, // spans only
			To:       `body == "slow"`,      // logs only
			JoinKeys: []string{string(semconv.HostNameKey)},
			Window:   time.Minute,
			EdgeType: "slowed",
		}}
	})
	load := func(host, id string, span byte) rec {
		return rec{service: "model", host: host, trace: traceID(span), span: spanID(span), at: t0, end: t0.Add(time.Second), name: "lora/load", attrs: reqIDAttr(id)}
	}
	h.consumeTraces(tracesOf(load("a", reqA, 1), load("b", reqB, 2))) // b pushes a's cause out
	assert.Equal(t, int64(1), h.counter("processor_reqidstitch_evicted", "table", "rule_keys", "reason", "capacity"))
	h.consumeLogs(logsOf(
		rec{service: "model", host: "a", trace: traceID(1), at: t0.Add(time.Second), name: "slow", attrs: reqIDAttr(reqA)},
		rec{service: "model", host: "b", trace: traceID(2), at: t0.Add(time.Second), name: "slow", attrs: reqIDAttr(reqB)},
	))
	logs := h.outLogs()
	a, _ := parents(logs[0].Attributes())
	b, _ := parents(logs[1].Attributes())
	assert.Empty(t, a)
	assert.Len(t, b, 1)
}

func TestParentsReplaceAWronglyTypedValue(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr(golden.CausalParents, "garbage")
	assert.True(t, addParent(attrs, "x:y", "r"))
	entries, rules := parents(attrs)
	assert.Equal(t, []string{"x:y"}, entries)
	assert.Equal(t, []string{"r"}, rules)
	assert.False(t, addParent(attrs, "x:y", "r"))
}

func TestJoinKey(t *testing.T) {
	attrs, res := pcommon.NewMap(), pcommon.NewMap()
	attrs.PutStr(golden.GPUID, "0")
	res.PutStr(string(semconv.HostNameKey), "gpu-node-0")
	res.PutStr(golden.GPUID, "ignored: the record's own value wins")
	key, ok := joinKey([]string{string(semconv.HostNameKey), golden.GPUID}, attrs, res)
	assert.True(t, ok)
	assert.Equal(t, "gpu-node-0\x000", key)
	_, ok = joinKey([]string{"missing"}, attrs, res)
	assert.False(t, ok)
	attrs.PutStr("empty", "")
	_, ok = joinKey([]string{"empty"}, attrs, res)
	assert.False(t, ok, "an empty value joins nothing")
}

func TestAWaitingRecordIsACauseFromItsArrival(t *testing.T) {
	h := newHarness(t, nil)
	// A driver event is reported as it happens; the span it belongs to, when it ends.
	oom := gpuEvent(enginePID, 7, 100*time.Millisecond)
	oom.attrs["hw.gpu.memory.usage"], oom.attrs["hw.gpu.memory.limit"], oom.attrs[golden.GPUID] = int64(99), int64(100), "0"
	h.consumeLogs(logsOf(oom))
	require.Empty(t, h.outLogs(), "it waits for its span")

	slow := engineSpan(reqA, 1, 10, 7, 0, 4*time.Second)
	slow.attrs[golden.LatencyMs] = 4000.0
	slow.attrs[golden.GPUID] = "0"
	h.consumeTraces(tracesOf(slow))
	h.tick(100 * time.Millisecond)

	logs := h.outLogs()
	require.Len(t, logs, 1)
	assert.Equal(t, reqA, str(logs[0].Attributes(), golden.ReqID), "attributed once its span came")
	// The span started before the event: the event did not cause it.
	entries, _ := parents(h.outSpans()[0].Attributes())
	assert.Empty(t, entries)

	later := engineSpan(reqB, 2, 20, 8, 200*time.Millisecond, 5*time.Second)
	later.attrs[golden.LatencyMs] = 4800.0
	later.attrs[golden.GPUID] = "0"
	h.consumeTraces(tracesOf(later))
	entries, _ = parents(h.outSpans()[1].Attributes())
	assert.Equal(t, []string{str(logs[0].Attributes(), golden.EventID) + ":caused_timeout"}, entries)
}
