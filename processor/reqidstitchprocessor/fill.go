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
// (ruleLogs). Records that carry a req_id are visited first, so that a
// record with only a trace finds the bindings of its whole batch.
func (s *stitcher) stitchLogs(ld plog.Logs, p *pass, hold func(plog.Logs, time.Duration) bool, ev *eventIDs) {
	p.begin(ld.LogRecordCount(), len(s.index.shards))
	at := 0
	for _, rl := range ld.ResourceLogs().All() {
		o := p.addOrigin(s.origin(rl.Resource()))
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				s.planLog(p, at, o, rl, sl, lr)
				at++
			}
		}
	}
	s.logRounds(p)
	at = 0
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				event, wait := ev.next(), p.results[at].wait
				at++
				if wait != noWait && hold != nil && s.holdLog(rl, sl, lr, hold, s.waitOf(wait), event) {
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
// lock), and the visits it hands the shards' owners (see owner.go).
type pass struct {
	now     int64
	tally   tally
	jobs    []job // by shard
	results []result
	origins []origin
	events  []golden.EventHash // of the spans visited, by record
	// later are the visits of log records with only a trace, planned once
	// the batch's bindings are made, and of spans that link to a trace no
	// request had yet, planned once the batch's requests are.
	later []visit
	wg    sync.WaitGroup
}

var passPool = sync.Pool{New: func() any { return new(pass) }}

func newPass(now int64) *pass {
	p := passPool.Get().(*pass)
	p.now, p.tally = now, tally{}
	return p
}

func (p *pass) free() {
	// No request or record stays reachable from the pool.
	clear(p.results)
	clear(p.origins)
	p.events = nil
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

// planLog plans the visit of one log record, or settles what it waits for.
func (s *stitcher) planLog(p *pass, at int, origin int32, rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) {
	id, hasID := reqIDOf(lr.Attributes())
	v := visit{at: int32(at), origin: origin, log: lr}
	o := &p.origins[origin]
	switch {
	case hasID && id == "":
	case hasID && !lr.TraceID().IsEmpty():
		v.kind = visitLogBind
		p.planID(s.index, id, v)
	case hasID:
		s.services.markLogsNoContext(o.service)
		v.kind = visitLogFill
		p.planID(s.index, id, v)
	case !lr.TraceID().IsEmpty():
		v.kind = visitLogTrace
		p.later = append(p.later, v)
	case s.isGPUEvent(rl, sl, lr):
		if id, wait := s.attributeGPUEvent(*o, lr, p); wait != noWait {
			p.results[at].wait = wait
		} else if id != "" {
			v.kind = visitLogGPU
			p.planID(s.index, id, v)
		}
	}
}

// logRounds makes the visits planned for a batch of log records: those by
// req_id, then those through a trace.
func (s *stitcher) logRounds(p *pass) {
	s.round(p)
	if len(p.later) == 0 {
		return
	}
	s.roundLater(p)
}

// roundLater plans the visits put off for later, and makes them. A span
// may link to a span that itself waits for its link (work detached from
// detached work): rounds go on while each plans some of them, the last one
// without putting off any.
func (s *stitcher) roundLater(p *pass) {
	var pending map[pcommon.TraceID]bool
	for {
		later := p.later
		p.later = nil
		clear(pending)
		for _, v := range later {
			if v.kind == visitSpanTrace && v.span.Links().Len() > 0 {
				if pending == nil {
					pending = map[pcommon.TraceID]bool{}
				}
				pending[v.span.TraceID()] = true
			}
		}
		for _, v := range later {
			s.planTrace(p, v, planLater, pending)
		}
		last := len(p.later) == len(later)
		if last {
			p.later = p.later[:0]
			for _, v := range later {
				s.planTrace(p, v, planLast, nil)
			}
		}
		s.round(p)
		clear(later)
		if last || len(p.later) == 0 {
			p.later = later[:0]
			return
		}
	}
}

// waitOf is how long a record may wait for w; 0: the hold's own duration.
func (s *stitcher) waitOf(w waitFor) time.Duration {
	if w == waitGPUSpan {
		return s.cfg.GPUAttribution.Wait
	}
	return 0
}

// fillTraceContext gives a log record the trace context of the request's span
// of the same service that covers it, else of the primary root. Called by
// r's shard's owner.
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

// restitchLogs retries the binding of held records; each that still waits
// has its wait in p.results, in order.
func (s *stitcher) restitchLogs(held []parked[plog.Logs], p *pass) {
	p.begin(len(held), len(s.index.shards))
	for i, h := range held {
		rl, sl, lr := parkedLog(h.data)
		s.planLog(p, i, p.addOrigin(s.origin(rl.Resource())), rl, sl, lr)
	}
	s.logRounds(p)
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

// stitchSpans stitches a batch of spans in place, like stitchLogs, in two
// rounds: the first binds every span that carries a req_id, so that the
// batch's roots and traces are known before any span is filled or marked.
func (s *stitcher) stitchSpans(td ptrace.Traces, p *pass, hold func(ptrace.Traces, time.Duration) bool, ev *eventIDs) {
	p.begin(td.SpanCount(), len(s.index.shards))
	p.events = ev.ids
	at := 0
	for _, rs := range td.ResourceSpans().All() {
		o := p.addOrigin(s.origin(rs.Resource()))
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				id, present := reqIDOf(span.Attributes())
				if id != "" {
					p.planID(s.index, id, visit{kind: visitSpanBind, at: int32(at), origin: o, span: span})
				}
				p.results[at].carriesReqID = present
				at++
			}
		}
	}
	s.round(p)
	at = 0
	for o, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				s.planSpan(p, visit{at: int32(at), origin: int32(o), span: span})
				at++
			}
		}
	}
	s.round(p)
	if len(p.later) > 0 {
		s.roundLater(p)
	}
	at = 0
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			ss.Spans().RemoveIf(func(span ptrace.Span) bool {
				event, wait := ev.next(), p.results[at].wait
				at++
				if wait != noWait && hold != nil && s.holdSpan(rs, ss, span, hold, event) {
					return true
				}
				ev.keep(event)
				return false
			})
		}
	}
}

// planSpan plans the filling visit of a span: on the request the first round
// bound it to, else on the one its trace is bound to, if it carries no req_id.
func (s *stitcher) planSpan(p *pass, v visit) {
	if v.r = p.results[v.at].r; v.r != nil {
		v.kind = visitSpanFill
		p.plan(int(v.r.shard), v)
		return
	}
	if p.results[v.at].carriesReqID || v.span.TraceID().IsEmpty() {
		return
	}
	v.kind = visitSpanTrace
	s.planTrace(p, v, planFirst, nil)
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
// Called by r's shard's owner.
func (s *stitcher) observeSpan(o origin, span ptrace.Span, r *request, event golden.EventHash, t *tally) {
	ti := s.index.bind(r, span.TraceID())
	if ti < 0 {
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
	if s.gpu != nil && o.pid != 0 {
		s.gpu.observe(procKey{host: o.host, container: o.container, pid: o.pid}, gpuSpan{
			start: span.StartTimestamp(), end: span.EndTimestamp(),
			tid:   intAttr(span.Attributes(), string(semconv.ThreadIDKey)),
			reqID: r.id(), trace: span.TraceID(), span: span.SpanID(),
		}, t)
	}
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

// restitchSpans is restitchLogs for spans.
func (s *stitcher) restitchSpans(held []parked[ptrace.Traces], p *pass) {
	p.begin(len(held), len(s.index.shards))
	p.events = make([]golden.EventHash, len(held))
	for i, h := range held {
		rs, ss, span := parkedSpan(h.data)
		p.events[i] = spanEventID(rs, ss, span)
		_, p.results[i].carriesReqID = reqIDOf(span.Attributes())
		s.planSpan(p, visit{at: int32(i), origin: p.addOrigin(s.origin(rs.Resource())), span: span})
	}
	s.round(p)
	if len(p.later) > 0 {
		s.roundLater(p)
	}
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
