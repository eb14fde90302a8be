package reqidstitchprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
)

// mixChunk is how many requests go into one pair of batches; a tick of
// mixChunk × 2 ms follows each pair.
const mixChunk = 50

// runMix passes the requests through one harness, chunk by chunk (traces then
// logs, or logs first), and lets every hold expire at the end.
func runMix(h *harness, reqs []*mixRequest, b *mixBatches, logsFirst bool) {
	for i := 0; i < len(reqs); i += mixChunk {
		td, ld := b.build(reqs[i:min(i+mixChunk, len(reqs))])
		if logsFirst {
			h.consumeLogs(ld)
			h.consumeTraces(td)
		} else {
			h.consumeTraces(td)
			h.consumeLogs(ld)
		}
		h.tick(mixChunk * 2 * time.Millisecond)
	}
	h.tick(time.Minute)
}

// mixStats describes the output of a mix run, over the records that belong
// to a request (noise, which belongs to none, is counted apart).
type mixStats struct {
	records, withReqID, withBoth int
	wrongReqID, wrongTrace       int
	noise, noiseWithReqID        int
	asyncSpans, asyncSpansLinked int
	asyncLogs, asyncLogsMarked   int
}

func (st mixStats) reqIDShare() float64 { return float64(st.withReqID) / float64(st.records) }
func (st mixStats) bothShare() float64  { return float64(st.withBoth) / float64(st.records) }

func measureMix(tb testing.TB, reqs []*mixRequest, spans []ptrace.Span, logs []plog.LogRecord) mixStats {
	type truth struct {
		traces    map[pcommon.TraceID]bool
		primary   pcommon.TraceID
		root      pcommon.SpanID
		rootEvent string
	}
	byID := map[string]*truth{}
	for _, r := range reqs {
		tr := &truth{traces: map[pcommon.TraceID]bool{}}
		for _, s := range r.Spans {
			tr.traces[pcommon.TraceID(s.Context.TraceID())] = true
		}
		primary, root := primaryRoot(r.Request)
		tr.primary, tr.root = pcommon.TraceID(primary), pcommon.SpanID(root)
		byID[r.Truth.ReqID] = tr
	}
	for _, s := range spans {
		if tr := byID[str(s.Attributes(), testReq)]; tr != nil && s.SpanID() == tr.root {
			tr.rootEvent = str(s.Attributes(), golden.EventID)
		}
	}

	var st mixStats
	count := func(attrs pcommon.Map, trace pcommon.TraceID) (*truth, bool) {
		want := str(attrs, testReq)
		got := str(attrs, golden.ReqID)
		if want == "" {
			st.noise++
			if got != "" {
				st.noiseWithReqID++
			}
			return nil, false
		}
		tr := byID[want]
		st.records++
		switch {
		case got == want:
			st.withReqID++
			if !trace.IsEmpty() {
				st.withBoth++
			}
		case got != "":
			st.wrongReqID++
		}
		if !trace.IsEmpty() && !tr.traces[trace] {
			st.wrongTrace++
		}
		return tr, !trace.IsEmpty() && trace != tr.primary
	}
	for _, s := range spans {
		tr, async := count(s.Attributes(), s.TraceID())
		if !async {
			continue
		}
		st.asyncSpans++
		links := s.Links()
		if links.Len() == 1 && links.At(0).TraceID() == tr.primary && links.At(0).SpanID() == tr.root &&
			str(s.Attributes(), golden.StitchDetached) == "true" && str(s.Attributes(), golden.StitchAsyncOf) == tr.rootEvent {
			st.asyncSpansLinked++
		}
	}
	for _, l := range logs {
		tr, async := count(l.Attributes(), l.TraceID())
		if !async {
			continue
		}
		st.asyncLogs++
		if tr.rootEvent != "" && str(l.Attributes(), golden.StitchAsyncOf) == tr.rootEvent {
			st.asyncLogsMarked++
		}
	}
	tb.Logf("records of requests: %d; with their req_id: %d (%.4f%%); with req_id and trace context: %d (%.4f%%); wrong req_id: %d, wrong trace: %d; noise: %d (bound: %d); async spans linked: %d/%d; async logs marked: %d/%d",
		st.records, st.withReqID, 100*st.reqIDShare(), st.withBoth, 100*st.bothShare(), st.wrongReqID, st.wrongTrace,
		st.noise, st.noiseWithReqID, st.asyncSpansLinked, st.asyncSpans, st.asyncLogsMarked, st.asyncLogs)
	return st
}

const mixRequests = 4000

func TestMixCarriesReqIDAndTraceContext(t *testing.T) {
	reqs := generateMix(t, mixRequests)
	for _, v := range []struct {
		name                            string
		logsFirst, logsInSpansLackReqID bool
	}{
		{name: "traces first"},
		{name: "logs first", logsFirst: true},
		{name: "logs in spans print no req_id", logsInSpansLackReqID: true},
		{name: "logs first and logs in spans print no req_id", logsFirst: true, logsInSpansLackReqID: true},
	} {
		t.Run(v.name, func(t *testing.T) {
			td, ld := (&mixBatches{logsInSpansLackReqID: v.logsInSpansLackReqID}).build(reqs)
			t.Log("before stitching:")
			measureMix(t, reqs, spansOf(td), logsOfBatch(ld))

			h := newHarness(t, nil)
			runMix(h, reqs, &mixBatches{logsInSpansLackReqID: v.logsInSpansLackReqID}, v.logsFirst)
			t.Log("after stitching:")
			st := measureMix(t, reqs, h.outSpans(), h.outLogs())

			assert.GreaterOrEqual(t, st.bothShare(), 0.999, "share of request records with req_id and trace context")
			assert.Zero(t, st.wrongReqID, "no record is given another request's req_id")
			assert.Zero(t, st.wrongTrace, "no record is given another request's trace")
			assert.Zero(t, st.noiseWithReqID, "noise stays unbound")
			assert.Positive(t, st.asyncSpans)
			assert.Equal(t, st.asyncSpans, st.asyncSpansLinked, "every async span is linked to its request's primary root")
			if !v.logsFirst {
				// Logs first, an async log that carries both ids passes before its
				// request's root is known: it is linked by its req_id only.
				assert.Equal(t, st.asyncLogs, st.asyncLogsMarked, "every async log names its request's root")
			}
			if v.logsInSpansLackReqID {
				assert.Positive(t, h.counter("processor_reqidstitch_records_filled", "direction", "req_id"))
			}
			assert.Positive(t, h.counter("processor_reqidstitch_records_filled", "direction", "trace_context"))
			assert.Positive(t, h.counter("processor_reqidstitch_records_filled", "direction", "gpu"))
			assert.Zero(t, h.counter("processor_reqidstitch_hold_released", "outcome", "overflow"))
		})
	}
}

func spansOf(td ptrace.Traces) (out []ptrace.Span) {
	forEachSpan(td, func(_ ptrace.ResourceSpans, s ptrace.Span) { out = append(out, s) })
	return out
}

func logsOfBatch(ld plog.Logs) (out []plog.LogRecord) {
	forEachLog(ld, func(_ plog.ResourceLogs, l plog.LogRecord) { out = append(out, l) })
	return out
}

// Every S1–S3 request's async work (vector store, audit, analytics traces) is
// linked to the request, scenario by scenario.
func TestMixAsyncWorkOfEveryScenarioIsLinked(t *testing.T) {
	reqs := generateMix(t, mixRequests)
	h := newHarness(t, nil)
	runMix(h, reqs, &mixBatches{}, false)
	scenario := map[string]string{}
	for _, r := range reqs {
		scenario[r.Truth.ReqID] = string(r.Truth.Scenario)
	}
	async, linked := map[string]int{}, map[string]int{}
	for _, s := range h.outSpans() {
		id := str(s.Attributes(), testReq)
		if str(s.Attributes(), golden.StitchDetached) == "true" && s.Links().Len() == 1 {
			linked[scenario[id]]++
		}
	}
	for _, r := range reqs {
		for _, s := range r.Spans {
			if s.Context.TraceID().String() != r.Truth.TraceIDs[0] {
				async[string(r.Truth.Scenario)]++
			}
		}
	}
	for _, sc := range []string{"s1", "s2", "healthy"} {
		assert.Positive(t, async[sc], "scenario %s has async work", sc)
	}
	assert.Equal(t, async, linked)
	t.Logf("async spans linked, by scenario: %v", linked)
}

// The agent tier: one processor per node sees only that node's records. Every
// record must carry its req_id before the load balancer routes on it.
func TestMixAgentTierGivesEveryRecordItsReqID(t *testing.T) {
	reqs := generateMix(t, mixRequests)
	for _, lacking := range []bool{false, true} {
		hosts := map[string]bool{}
		td, ld := (&mixBatches{logsInSpansLackReqID: lacking}).build(reqs)
		t.Logf("logs in spans print no req_id: %v; before stitching:", lacking)
		measureMix(t, reqs, spansOf(td), logsOfBatch(ld))
		forEachSpan(td, func(rs ptrace.ResourceSpans, _ ptrace.Span) {
			hosts[str(rs.Resource().Attributes(), "host.name")] = true
		})
		forEachLog(ld, func(rl plog.ResourceLogs, _ plog.LogRecord) {
			hosts[str(rl.Resource().Attributes(), "host.name")] = true
		})
		var spans []ptrace.Span
		var logs []plog.LogRecord
		for host := range hosts {
			agent := newHarness(t, func(c *Config) { c.LinkDetached = false })
			runMix(agent, reqs, &mixBatches{logsInSpansLackReqID: lacking, keep: func(h string) bool { return h == host }}, true)
			spans = append(spans, agent.outSpans()...)
			logs = append(logs, agent.outLogs()...)
		}
		t.Log("after agent-tier stitching:")
		st := measureMix(t, reqs, spans, logs)
		assert.GreaterOrEqual(t, st.reqIDShare(), 0.999, "logs in spans lack req_id: %v", lacking)
		assert.Zero(t, st.wrongReqID)
		assert.Zero(t, st.noiseWithReqID)
		assert.Len(t, hosts, 13, "the workload's nodes")
	}
}

// The default rules fire on no record of the generated mix (it holds no cache
// miss, no GPU near its memory limit, no retry or fallback; S2's slow forward
// passes have normal GPU memory), and on exactly the records that should fire
// them once such causes are added.
func TestMixDefaultRules(t *testing.T) {
	reqs := generateMix(t, 2000)
	h := newHarness(t, nil)
	runMix(h, reqs, &mixBatches{}, false)
	for _, s := range h.outSpans() {
		_, ok := s.Attributes().Get(golden.CausalParents)
		require.False(t, ok, "span %q has causes", s.Name())
	}
	for _, l := range h.outLogs() {
		_, ok := l.Attributes().Get(golden.CausalParents)
		require.False(t, ok, "log %q has causes", l.Body().AsString())
	}
	assert.Zero(t, h.counter("processor_reqidstitch_rule_hits"))

	// Causes added: a batch of them comes before each chunk's records.
	h = newHarness(t, nil)
	b := &mixBatches{}
	oracle := newRuleOracle()
	for i := 0; i < len(reqs); i += mixChunk {
		chunk := reqs[i:min(i+mixChunk, len(reqs))]
		causes := b.causes(chunk)
		td, ld := b.build(chunk)
		oracle.see(causes)
		oracle.seeTraces(td)
		oracle.see(ld)
		h.consumeLogs(causes)
		h.consumeTraces(td)
		h.consumeLogs(ld)
		h.tick(mixChunk * 2 * time.Millisecond)
	}
	h.tick(time.Minute)

	got := map[int][]string{}
	for _, s := range h.outSpans() {
		if _, rules := parents(s.Attributes()); len(rules) > 0 {
			got[recordNumber(s.Attributes())] = rules
		}
	}
	for _, l := range h.outLogs() {
		if _, rules := parents(l.Attributes()); len(rules) > 0 {
			got[recordNumber(l.Attributes())] = rules
		}
	}
	assert.Equal(t, oracle.expected, got)
	hits := map[string]int{}
	for _, rules := range oracle.expected {
		for _, r := range rules {
			hits[r]++
		}
	}
	for _, r := range defaultRules() {
		assert.Positive(t, hits[r.Name], "rule %s never fires", r.Name)
		assert.Equal(t, int64(hits[r.Name]), h.counter("processor_reqidstitch_rule_hits", "rule", r.Name))
	}
	t.Logf("rule hits: %v", hits)
}

// causes returns, for a chunk of requests, log records that fire the default
// rules: a cache miss before some model/forward passes, a GPU near its memory
// limit before some slow (S2) ones, and a failure followed by a retry and a
// fallback in some gateway requests.
func (m *mixBatches) causes(reqs []*mixRequest) plog.Logs {
	ld := plog.NewLogs()
	add := func(r *mixRequest, service, host string, scope string, at time.Time, attrs map[string]any) {
		rl := ld.ResourceLogs().AppendEmpty()
		rec{service: service, host: host}.resource(rl.Resource())
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(scope)
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lr.Body().SetStr("cause")
		root, span := primaryRoot(r.Request)
		if service != "loom-gpu" { // logged inside the request's root span
			lr.SetTraceID(pcommon.TraceID(root))
			lr.SetSpanID(pcommon.SpanID(span))
		}
		putAttrs(lr.Attributes(), attrs)
		m.tag(lr.Attributes(), r.Truth.ReqID)
	}
	for _, r := range reqs {
		for _, s := range r.Spans {
			if s.Name != "model/forward" || s.Service.Name != "model" {
				continue
			}
			switch {
			case r.tid%7 == 0:
				add(r, "cache", "cache-0", workload.ScopeName, s.Start.Add(-50*time.Millisecond), staged(r.Truth.ReqID, "cache/miss", nil))
			case r.Truth.Scenario == "s2" && r.tid%2 == 0:
				add(r, "loom-gpu", s.Service.Host, golden.GPUEventScope, s.Start.Add(-100*time.Millisecond), map[string]any{
					"process.pid": int64(s.Service.PID), "hw.gpu.memory.usage": int64(78_000), "hw.gpu.memory.limit": int64(81_559), golden.GPUID: "0",
				})
			case r.tid%11 == 0:
				at := s.Start
				add(r, "gateway", "edge-0", workload.ScopeName, at.Add(time.Millisecond), staged(r.Truth.ReqID, "model/forward", map[string]any{"error.type": "timeout"}))
				add(r, "gateway", "edge-0", workload.ScopeName, at.Add(2*time.Millisecond), staged(r.Truth.ReqID, "model/forward", map[string]any{"retry.attempt": 1}))
				add(r, "gateway", "edge-0", workload.ScopeName, at.Add(3*time.Millisecond), staged(r.Truth.ReqID, "model/fallback", nil))
			}
		}
	}
	return ld
}

// ruleOracle restates the default rules in plain Go and applies them to the
// records in the order the processor sees them: each effect is joined to the
// latest cause with its key seen before it, if that cause is no older than the window.
type ruleOracle struct {
	latest   map[string]map[string]time.Time // rule → join key → time of the latest cause
	expected map[int][]string                // test.record → rules that fire on it
}

func newRuleOracle() *ruleOracle {
	return &ruleOracle{latest: map[string]map[string]time.Time{}, expected: map[int][]string{}}
}

type oracleRule struct {
	name     string
	window   time.Duration
	key      func(attrs, res pcommon.Map) string
	from, to func(attrs pcommon.Map) bool
}

func oracleRules() []oracleRule {
	reqKey := func(a, _ pcommon.Map) string { return str(a, golden.ReqID) }
	gpuKey := func(a, res pcommon.Map) string {
		host, gpu := str(res, "host.name"), str(a, golden.GPUID)
		if host == "" || gpu == "" {
			return ""
		}
		return host + "/" + gpu
	}
	stage := func(a pcommon.Map) string { return str(a, golden.Stage) }
	num := func(a pcommon.Map, k string) float64 {
		v, ok := a.Get(k)
		if !ok {
			return 0
		}
		switch v.Type() {
		case pcommon.ValueTypeInt:
			return float64(v.Int())
		case pcommon.ValueTypeDouble:
			return v.Double()
		}
		return 0
	}
	failed := func(a pcommon.Map) bool { _, ok := a.Get("error.type"); return ok }
	hasPrefix := func(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
	return []oracleRule{
		{name: "cache_miss_trigger_inference", window: 500 * time.Millisecond, key: reqKey,
			from: func(a pcommon.Map) bool { return hasPrefix(stage(a), "cache/miss") },
			to: func(a pcommon.Map) bool {
				return hasPrefix(stage(a), "model/forward") || hasPrefix(stage(a), "model/inference")
			}},
		{name: "gpu_oom_cause_timeout", window: 5 * time.Second, key: gpuKey,
			from: func(a pcommon.Map) bool {
				_, ok := a.Get("hw.gpu.memory.limit")
				return ok && num(a, "hw.gpu.memory.usage") >= 0.95*num(a, "hw.gpu.memory.limit")
			},
			to: func(a pcommon.Map) bool { return num(a, golden.LatencyMs) > 3000 }},
		{name: "retry_of", window: 30 * time.Second, key: reqKey, from: failed,
			to: func(a pcommon.Map) bool { return num(a, "retry.attempt") > 0 }},
		{name: "fallback_triggered", window: 5 * time.Second, key: reqKey, from: failed,
			to: func(a pcommon.Map) bool { return stage(a) == "model/fallback" }},
	}
}

func (o *ruleOracle) record(attrs, res pcommon.Map, at time.Time) {
	for _, r := range oracleRules() {
		key := r.key(attrs, res)
		if key == "" {
			continue
		}
		if o.latest[r.name] == nil {
			o.latest[r.name] = map[string]time.Time{}
		}
		if r.to(attrs) {
			if c, ok := o.latest[r.name][key]; ok && !at.Before(c) && at.Sub(c) <= r.window {
				n := recordNumber(attrs)
				o.expected[n] = append(o.expected[n], r.name)
			}
		}
		if c, ok := o.latest[r.name][key]; r.from(attrs) && (!ok || !at.Before(c)) {
			o.latest[r.name][key] = at
		}
	}
}

func (o *ruleOracle) see(ld plog.Logs) {
	forEachLog(ld, func(rl plog.ResourceLogs, lr plog.LogRecord) {
		o.record(lr.Attributes(), rl.Resource().Attributes(), lr.Timestamp().AsTime())
	})
}

func (o *ruleOracle) seeTraces(td ptrace.Traces) {
	forEachSpan(td, func(rs ptrace.ResourceSpans, s ptrace.Span) {
		o.record(s.Attributes(), rs.Resource().Attributes(), s.StartTimestamp().AsTime())
	})
}
