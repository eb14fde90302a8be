package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/golden"
)

// waitFor is what a record that cannot be bound yet waits for.
type waitFor uint8

const (
	noWait waitFor = iota
	// waitBinding: a record of the request that binds it (hold::duration).
	waitBinding
	// waitGPUSpan: a GPU event waits for the span that covers it, which its
	// SDK exports only once it ends and its batch is due
	// (gpu_attribution::wait).
	waitGPUSpan
)

// stitchLogs stitches a batch of log records in place. A record that waits for
// a binding is offered to hold (nil: no hold) as a batch of its own, with how
// long it may wait (0: the hold's own duration), and, when
// taken, removed from ld; the others meet the causal rules on their way out
// (ruleLogs). Each record takes only the mutex of its request's shard.
func (s *stitcher) stitchLogs(ld plog.Logs, p *pass, hold func(plog.Logs, time.Duration) bool, ev *eventIDs) {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		o := s.origin(rl.Resource())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				event := ev.next()
				if wait := s.stitchLog(o, rl, sl, lr, p); wait != noWait && hold != nil && s.holdLog(rl, sl, lr, hold, s.waitOf(wait), event) {
					return true
				}
				ev.keep(event)
				return false
			})
		}
	}
}

// pass is what one call (a batch, a sweep) stitches with: its clock
// reading, the counts it makes (flushed to the telemetry after, outside every
// lock), and what the first pass over a span batch leaves for the second.
type pass struct {
	now   int64
	tally tally
	spans []boundSpan
}

var passPool = sync.Pool{New: func() any { return new(pass) }}

func newPass(now int64) *pass {
	p := passPool.Get().(*pass)
	p.now, p.tally = now, tally{}
	return p
}

func (p *pass) free() {
	clear(p.spans) // no request stays reachable from the pool
	p.spans = p.spans[:0]
	passPool.Put(p)
}

// eventIDs carries a batch's event ids from admitting it to stitching it
// to its rules, in record order: no pass reads event.id back.
type eventIDs struct {
	ids        []golden.EventHash
	read, kept int
}

var eventIDPool = sync.Pool{New: func() any { return new(eventIDs) }}

func newEventIDs() *eventIDs {
	ev := eventIDPool.Get().(*eventIDs)
	ev.ids, ev.read, ev.kept = ev.ids[:0], 0, 0
	return ev
}

func (ev *eventIDs) free() { eventIDPool.Put(ev) }

// next is the id of the next record in order.
func (ev *eventIDs) next() golden.EventHash {
	ev.read++
	return ev.ids[ev.read-1]
}

// keep notes that the record whose id is event stays in the batch (it was
// not held): the ids of the records that stay are read again, by the rules.
func (ev *eventIDs) keep(event golden.EventHash) {
	ev.ids[ev.kept] = event
	ev.kept++
}

// rewind starts reading the kept ids from the first.
func (ev *eventIDs) rewind() { ev.read, ev.ids = 0, ev.ids[:ev.kept] }

// admitLogs admits every record of an arriving batch and gives it its
// event.id, before any shard is locked: they read only the record.
// It returns how many identity attributes it removed.
func (s *stitcher) admitLogs(ld plog.Logs, ev *eventIDs) (removed int64) {
	eachLog(ld, func(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) {
		removed += s.admit(lr.Attributes())
		ev.ids = append(ev.ids, logEventID(rl, sl, lr))
	})
	return removed
}

// eachLog calls fn for every record of ld, in order.
func eachLog(ld plog.Logs, fn func(plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord)) {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				fn(rl, sl, lr)
			}
		}
	}
}

func logEventID(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) golden.EventHash {
	return ensureEventID(lr.Attributes(), func() golden.EventHash {
		return golden.LogEventHash(rl.Resource(), sl.Scope(), lr)
	})
}

// stitchLog binds and fills one log record; it reports what the record
// waits for when the index cannot bind it yet.
func (s *stitcher) stitchLog(o origin, rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord, p *pass) waitFor {
	r, sh, wait := s.bindLog(o, rl, sl, lr, p)
	if r == nil {
		return wait
	}
	attrs := lr.Attributes()
	carry(sh, r, attrs, &p.tally)
	s.markDetached(r, lr.TraceID(), attrs, &p.tally)
	sh.mu.Unlock()
	return noWait
}

// waitOf is how long a record may wait for w; 0: the hold's own duration.
func (s *stitcher) waitOf(w waitFor) time.Duration {
	if w == waitGPUSpan {
		return s.cfg.GPUAttribution.Wait
	}
	return 0
}

// bindLog finds the request of a log record, binding or filling what it can.
// It returns the request with its shard locked, for the caller to unlock, or
// nil, with nothing locked, and what the record waits for.
func (s *stitcher) bindLog(o origin, rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord, p *pass) (*request, *shard, waitFor) {
	attrs := lr.Attributes()
	id, hasID := reqIDOf(attrs)
	trace := lr.TraceID()
	switch {
	case hasID && id == "":
		return nil, nil, noWait
	case hasID && !trace.IsEmpty():
		sh, key := s.index.lockID(id)
		r := s.index.getOrAdd(sh, key, id, p.now, &p.tally)
		if r == nil {
			sh.mu.Unlock()
			return nil, nil, noWait
		}
		s.index.bind(r, trace)
		return r, sh, noWait
	case hasID:
		s.services.markLogsNoContext(o.service)
		sh, key := s.index.lockID(id)
		if r := sh.get(key, id, p.now); r != nil && s.fillTraceContext(r, o.service, lr, &p.tally) {
			return r, sh, noWait
		}
		sh.mu.Unlock()
		return nil, nil, waitBinding
	case !trace.IsEmpty():
		r, sh := s.index.lockTrace(trace, p.now)
		if r == nil {
			return nil, nil, waitBinding
		}
		attrs.PutStr(golden.ReqID, r.id())
		golden.Filled(attrs, golden.ReqID)
		p.tally.filled[filledReqID]++
		return r, sh, noWait
	case s.isGPUEvent(o, rl, sl, lr):
		return s.attributeGPUEvent(o, lr, p)
	}
	return nil, nil, noWait
}

// fillTraceContext gives a log record the trace context of the request's span
// of the same service that covers it, else of the primary root.
func (s *stitcher) fillTraceContext(r *request, svc serviceID, lr plog.LogRecord, t *tally) bool {
	if ref, ok := r.cover(svc, logTime(lr)); ok {
		lr.SetTraceID(r.trace(int(ref.trace)))
		lr.SetSpanID(ref.span)
	} else if r.hasPrimary() {
		lr.SetTraceID(r.primaryTrace())
		lr.SetSpanID(r.rootSpan)
	} else {
		return false
	}
	t.filled[filledTraceContext]++
	return true
}

func logTime(lr plog.LogRecord) pcommon.Timestamp {
	if ts := lr.Timestamp(); ts != 0 {
		return ts
	}
	return lr.ObservedTimestamp()
}

// holdLog offers a record that waits to hold as a batch of its own, with how
// long it may wait, and reports whether the hold took it. A held record is
// remembered as a cause as it arrives (see phase); one the hold refuses is
// put back where it was.
func (s *stitcher) holdLog(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord, hold func(plog.Logs, time.Duration) bool, wait time.Duration, event golden.EventHash) bool {
	parked := parkLog(rl, sl, lr)
	prl, psl, plr := parkedLog(parked)
	if !hold(parked, wait) {
		plr.MoveTo(lr)
		return false
	}
	s.rules.applyLog(prl, psl, plr, event, causeOnly)
	return true
}

// parkLog moves a record, with a copy of its resource and scope, into a
// batch of its own: the record leaves its batch, and is not copied.
func parkLog(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) plog.Logs {
	ld := plog.NewLogs()
	prl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().CopyTo(prl.Resource())
	prl.SetSchemaUrl(rl.SchemaUrl())
	psl := prl.ScopeLogs().AppendEmpty()
	sl.Scope().CopyTo(psl.Scope())
	psl.SetSchemaUrl(sl.SchemaUrl())
	lr.MoveTo(psl.LogRecords().AppendEmpty())
	return ld
}

// parkedLog is the record of a batch parkLog made, with its resource and scope.
func parkedLog(ld plog.Logs) (plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord) {
	rl := ld.ResourceLogs().At(0)
	sl := rl.ScopeLogs().At(0)
	return rl, sl, sl.LogRecords().At(0)
}

// restitchLog retries the binding of a parked record.
func (s *stitcher) restitchLog(ld plog.Logs, p *pass) bool {
	rl, sl, lr := parkedLog(ld)
	return s.stitchLog(s.origin(rl.Resource()), rl, sl, lr, p) != noWait
}

// ruleLogs applies the causal rules to the records of a batch on its way
// out, in order, without any shard locked. ev has their event ids; nil:
// they are read from each record.
func (s *stitcher) ruleLogs(ld plog.Logs, ev *eventIDs) {
	if len(s.rules.rules) == 0 {
		return
	}
	eachLog(ld, func(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) {
		var event golden.EventHash
		if ev != nil {
			event = ev.next()
		} else {
			event = logEventID(rl, sl, lr)
		}
		s.rules.applyLog(rl, sl, lr, event, effectAndCause)
	})
}

// stitchSpans stitches a batch of spans in place, like stitchLogs. It makes two
// passes: the first binds every span that carries a req_id, so that the
// batch's roots and traces are known before any span is filled or marked.
func (s *stitcher) stitchSpans(td ptrace.Traces, p *pass, hold func(ptrace.Traces, time.Duration) bool, ev *eventIDs) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		o := s.origin(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				event := ev.next()
				var r *request
				if id, _ := reqIDOf(span.Attributes()); id != "" {
					sh, key := s.index.lockID(id)
					if r = s.index.getOrAdd(sh, key, id, p.now, &p.tally); r != nil {
						s.observeSpan(sh, o, span, r, event, &p.tally)
					} else {
						sh.mu.Unlock()
					}
				}
				p.spans = append(p.spans, boundSpan{r: r, event: event})
			}
		}
	}
	next := 0
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		o := s.origin(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			ss.Spans().RemoveIf(func(span ptrace.Span) bool {
				b := p.spans[next]
				next++
				if s.stitchSpan(o, span, b.r, b.event, p) && hold != nil && s.holdSpan(rs, ss, span, hold, b.event) {
					return true
				}
				ev.keep(b.event)
				return false
			})
		}
	}
}

// boundSpan is what the first pass over a span batch leaves for the second.
type boundSpan struct {
	// r is nil when the span carries no usable req_id. Another pipeline may
	// evict it before the second pass: what that pass writes to it is lost,
	// as it would be a moment later.
	r     *request
	event golden.EventHash
}

// admitSpans is admitLogs for spans.
func (s *stitcher) admitSpans(td ptrace.Traces, ev *eventIDs) (removed int64) {
	eachSpan(td, func(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) {
		removed += s.admit(span.Attributes())
		ev.ids = append(ev.ids, spanEventID(rs, ss, span))
	})
	return removed
}

// eachSpan calls fn for every span of td, in order.
func eachSpan(td ptrace.Traces, fn func(ptrace.ResourceSpans, ptrace.ScopeSpans, ptrace.Span)) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				fn(rs, ss, span)
			}
		}
	}
}

func spanEventID(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) golden.EventHash {
	return ensureEventID(span.Attributes(), func() golden.EventHash {
		return golden.SpanEventHash(rs.Resource(), ss.Scope(), span)
	})
}

// observeSpan records what a span of request r tells: its trace, whether it
// is the primary root, and its time window for filling logs and GPU events.
// It unlocks r's shard sh, which the caller locked, before the GPU index.
func (s *stitcher) observeSpan(sh *shard, o origin, span ptrace.Span, r *request, event golden.EventHash, t *tally) {
	ti := s.index.bind(r, span.TraceID())
	if ti < 0 {
		sh.mu.Unlock()
		return
	}
	if span.ParentSpanID().IsEmpty() {
		r.observeRoot(ti, span.SpanID(), span.StartTimestamp(), event)
	}
	// The primary root is remembered anyway, and is what a log falls back to.
	isPrimaryRoot := r.primary == int8(ti) && r.rootSpan == span.SpanID()
	if s.services.keepsSpans(o.service) && !isPrimaryRoot {
		r.keep(newSpanRef(span.StartTimestamp(), span.EndTimestamp(), span.SpanID(), o.service, ti))
	}
	reqID := r.id()
	sh.mu.Unlock()
	if s.gpu != nil && o.pid != 0 {
		s.gpu.observe(procKey{host: o.host, container: o.container, pid: o.pid}, gpuSpan{
			start: span.StartTimestamp(), end: span.EndTimestamp(),
			tid:   intAttr(span.Attributes(), string(semconv.ThreadIDKey)),
			reqID: reqID, trace: span.TraceID(), span: span.SpanID(),
		}, t)
	}
}

// stitchSpan fills and marks one span; r is its request when the first pass
// bound it. It reports whether the span waits for a binding.
func (s *stitcher) stitchSpan(o origin, span ptrace.Span, r *request, event golden.EventHash, p *pass) bool {
	attrs := span.Attributes()
	var sh *shard
	if r == nil {
		trace := span.TraceID()
		if _, hasID := reqIDOf(attrs); hasID || trace.IsEmpty() {
			return false
		}
		if r, sh = s.index.lockTrace(trace, p.now); r == nil {
			return true
		}
		attrs.PutStr(golden.ReqID, r.id())
		golden.Filled(attrs, golden.ReqID)
		p.tally.filled[filledReqID]++
		s.observeSpan(sh, o, span, r, event, &p.tally)
	}
	sh = s.index.lockRequest(r)
	carry(sh, r, attrs, &p.tally)
	if s.markDetached(r, span.TraceID(), attrs, &p.tally) {
		link := span.Links().AppendEmpty()
		link.SetTraceID(r.primaryTrace())
		link.SetSpanID(r.rootSpan)
	}
	sh.mu.Unlock()
	return false
}

// holdSpan is holdLog for spans, which wait the hold's own duration.
func (s *stitcher) holdSpan(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span, hold func(ptrace.Traces, time.Duration) bool, event golden.EventHash) bool {
	parked := parkSpan(rs, ss, span)
	prs, pss, pspan := parkedSpan(parked)
	if !hold(parked, 0) {
		pspan.MoveTo(span)
		return false
	}
	s.rules.applySpan(prs, pss, pspan, event, causeOnly)
	return true
}

// parkSpan is parkLog for spans.
func parkSpan(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) ptrace.Traces {
	td := ptrace.NewTraces()
	prs := td.ResourceSpans().AppendEmpty()
	rs.Resource().CopyTo(prs.Resource())
	prs.SetSchemaUrl(rs.SchemaUrl())
	pss := prs.ScopeSpans().AppendEmpty()
	ss.Scope().CopyTo(pss.Scope())
	pss.SetSchemaUrl(ss.SchemaUrl())
	span.MoveTo(pss.Spans().AppendEmpty())
	return td
}

// parkedSpan is the span of a batch parkSpan made, with its resource and scope.
func parkedSpan(td ptrace.Traces) (ptrace.ResourceSpans, ptrace.ScopeSpans, ptrace.Span) {
	rs := td.ResourceSpans().At(0)
	ss := rs.ScopeSpans().At(0)
	return rs, ss, ss.Spans().At(0)
}

func (s *stitcher) restitchSpan(td ptrace.Traces, p *pass) bool {
	rs, ss, span := parkedSpan(td)
	return s.stitchSpan(s.origin(rs.Resource()), span, nil, spanEventID(rs, ss, span), p)
}

// ruleSpans applies the causal rules to the spans of a batch on its way out,
// like ruleLogs.
func (s *stitcher) ruleSpans(td ptrace.Traces, ev *eventIDs) {
	if len(s.rules.rules) == 0 {
		return
	}
	eachSpan(td, func(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span) {
		var event golden.EventHash
		if ev != nil {
			event = ev.next()
		} else {
			event = spanEventID(rs, ss, span)
		}
		s.rules.applySpan(rs, ss, span, event, effectAndCause)
	})
}
