package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"slices"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/reqshard"
)

// Each shard of the index has an owner (reqshard): one goroutine that makes
// every visit to the shard's requests. A call plans a visit for each record
// that reads or writes request state, hands each shard the visits of its
// records at once (a round), and waits for them: a batch costs one hand-off
// per shard and round instead of a lock per record, and its shards are
// visited on as many cores as are free. What a visit writes to a record is
// that record's alone.

// visitKind is what a visit does for its record.
type visitKind uint8

const (
	// visitLogBind: a log record with a req_id and trace context binds the
	// trace to its request, and fills from it.
	visitLogBind visitKind = iota
	// visitLogFill: a log record with a req_id and no trace context takes its
	// request's, or waits for a binding.
	visitLogFill
	// visitLogGPU: a GPU event attributed to a span of request id fills from it.
	visitLogGPU
	// visitLogTrace: a log record with only trace context takes the req_id
	// of the request found through its trace, unless it was evicted since.
	visitLogTrace
	// visitLogTraceKey: a log record of a service keyed by trace, whose trace
	// is bound to no request, starts the request its trace keys.
	visitLogTraceKey
	// visitSpanBind: a span with a req_id binds its trace, root and window
	// (the first round of a span batch).
	visitSpanBind
	// visitSpanFill: a span bound in the first round fills from its request.
	// Another pipeline may have evicted the request between the rounds: what
	// the visit writes to it is lost, as it would be a moment later.
	visitSpanFill
	// visitSpanTrace: visitLogTrace for spans, which are then observed too.
	visitSpanTrace
	// visitSpanLink: a span whose trace is bound to no request joins the
	// request of the trace it links to (detached work started elsewhere).
	visitSpanLink
	// visitSpanTraceKey: visitLogTraceKey for spans.
	visitSpanTraceKey
)

// visit is one record's work on its request's shard. A batch plans one for
// most of its records, and a pass keeps them for the next batch: it is kept
// small.
type visit struct {
	at     int32 // the record's slot in the pass's results (and events)
	origin int32 // its resource's, in the pass's origins
	// key and id name the request (kinds by req_id); r is the request found
	// (the other kinds).
	key  uint64
	id   string
	r    *request
	log  plog.LogRecord
	span ptrace.Span
	kind visitKind
}

func (v *visit) trace() pcommon.TraceID {
	if v.kind <= visitLogTraceKey { // the kinds of log records come first
		return v.log.TraceID()
	}
	return v.span.TraceID()
}

// result is what the visits of a pass leave for each record.
type result struct {
	r    *request // a span's request, bound in the first round
	wait waitFor
	// carriesReqID: the span has a req_id, usable or not (it is never
	// filled), as its first reading found.
	carriesReqID bool
}

// job is one round's visits to one shard, or an order to expire it.
type job struct {
	visits []visit
	// The pass's: each visit writes its own record's slot of results.
	results []result
	origins []origin
	events  []golden.EventHash // of spans, by record
	now     int64
	expire  bool
	tally   tally
	done    *sync.WaitGroup
}

// startOwners starts a goroutine for each shard, until s.owners.Stop. No
// call may plan a visit while they are stopped.
func (s *stitcher) startOwners() {
	s.owners = reqshard.Start(len(s.index.shards), 4, func(i int, j *job) {
		sh := &s.index.shards[i]
		if j.expire {
			s.index.expire(sh, j.now, &j.tally)
		}
		for v := range j.visits {
			s.visit(sh, j, &j.visits[v])
		}
		j.done.Done()
	})
}

// begin readies the pass for the visits of n records.
func (p *pass) begin(n, shards int) {
	clear(p.results)
	p.results = slices.Grow(p.results[:0], n)[:n]
	p.origins = p.origins[:0]
	if len(p.jobs) != shards {
		p.jobs = make([]job, shards)
	}
}

// addOrigin notes the origin of the records planned next, and returns its
// position for their visits.
func (p *pass) addOrigin(o origin) int32 {
	p.origins = append(p.origins, o)
	return int32(len(p.origins) - 1)
}

// planID plans v on the shard of request id.
func (p *pass) planID(x *index, id string, v visit) {
	n, key := x.shardOf(id)
	v.id, v.key = id, key
	p.plan(n, v)
}

// planMode is when a visit through a trace is planned: a span that would
// follow a link or start a request is put off until the batch's other spans
// have made their requests, so that detached work finds the request it
// links to, and a trace's spans follow its linked span rather than start a
// request of their own.
type planMode uint8

const (
	// planFirst: the batch's first planning; every such span is put off.
	planFirst planMode = iota
	// planLater: a span whose link finds no request yet is put off again,
	// and so is a span of a trace whose linked span is.
	planLater
	// planLast: nothing is put off.
	planLast
)

// planTrace plans v on the shard of the request v's trace is bound to. A
// span whose trace is bound to none joins the request of a trace it links
// to; a record of a service keyed by trace, or any record when there is no
// hold to wait in, starts the request its trace keys; any other waits for a
// binding. pending holds the traces whose linked spans are put off (planLater).
func (s *stitcher) planTrace(p *pass, v visit, mode planMode, pending map[pcommon.TraceID]bool) {
	x := s.index
	if v.r = x.traceRequest(v.trace()); v.r != nil {
		p.plan(int(v.r.shard), v)
		return
	}
	isSpan := v.kind == visitSpanTrace
	if isSpan && v.span.Links().Len() > 0 {
		for _, link := range v.span.Links().All() {
			if v.r = x.traceRequest(link.TraceID()); v.r != nil {
				v.kind = visitSpanLink
				p.plan(int(v.r.shard), v)
				return
			}
		}
		if mode != planLast {
			p.later = append(p.later, v)
			return
		}
	}
	if isSpan && s.cfg.KeyByTrace && (mode == planFirst || mode == planLater && pending[v.trace()]) {
		p.later = append(p.later, v)
		return
	}
	// Asked once per record: a service keyed by trace has one in
	// probeEvery of its records wait.
	waits := s.cfg.Hold.Duration > 0 && !s.services.keysByTrace(p.origins[v.origin].service)
	if !s.cfg.KeyByTrace || waits {
		p.results[v.at].wait = waitBinding
		return
	}
	if isSpan {
		v.kind = visitSpanTraceKey
	} else {
		v.kind = visitLogTraceKey
	}
	p.planID(x, golden.TraceKey(v.trace()), v)
}

func (p *pass) plan(shard int, v visit) {
	p.jobs[shard].visits = append(p.jobs[shard].visits, v)
}

// round hands every shard its planned visits (and, when the pass expires,
// the order to), waits for them, and takes in what they counted.
func (s *stitcher) round(p *pass) {
	for i := range p.jobs {
		j := &p.jobs[i]
		if j.idle() {
			continue
		}
		j.results, j.origins, j.events, j.now, j.done = p.results, p.origins, p.events, p.now, &p.wg
		p.wg.Add(1)
		s.owners.Send(i, j)
	}
	p.wg.Wait()
	for i := range p.jobs {
		j := &p.jobs[i]
		if j.idle() {
			continue
		}
		p.tally.add(&j.tally)
		j.tally, j.expire = tally{}, false
		// No record or request stays reachable from the pass's pool.
		clear(j.visits)
		j.visits, j.results, j.origins, j.events = j.visits[:0], nil, nil, nil
	}
}

// idle reports whether the job has nothing for its shard this round.
func (j *job) idle() bool { return len(j.visits) == 0 && !j.expire }

// expire has every owner drop its shard's requests past their TTL, in one round.
func (s *stitcher) expire(p *pass) {
	p.begin(0, len(s.index.shards))
	for i := range p.jobs {
		p.jobs[i].expire = true
	}
	s.round(p)
}

// visit does v's work on its request, in its shard sh.
func (s *stitcher) visit(sh *shard, j *job, v *visit) {
	t, now := &j.tally, j.now
	res := &j.results[v.at]
	switch v.kind {
	case visitLogBind:
		r := s.index.getOrAdd(sh, v.key, v.id, now, t)
		if r == nil {
			return
		}
		s.index.bind(r, v.log.TraceID())
		s.fillLog(sh, r, v.log, t)
	case visitLogFill:
		r := sh.get(v.key, v.id, now)
		if r == nil || !s.fillTraceContext(r, j.origins[v.origin].service, v.log, t) {
			res.wait = waitBinding
			return
		}
		s.fillLog(sh, r, v.log, t)
	case visitLogGPU:
		if r := sh.get(v.key, v.id, now); r != nil {
			s.fillLog(sh, r, v.log, t)
		}
	case visitLogTrace:
		if !v.r.byTrace(v.log.TraceID(), now) {
			res.wait = waitBinding
			return
		}
		fillReqID(v.r, v.log.Attributes(), t)
		s.fillLog(sh, v.r, v.log, t)
	case visitSpanBind:
		if r := s.index.getOrAdd(sh, v.key, v.id, now, t); r != nil {
			s.observeSpan(j.origins[v.origin], v.span, r, j.events[v.at], t)
			res.r = r
		}
	case visitSpanFill:
		s.fillSpan(sh, v.r, v.span, t)
	case visitSpanTrace:
		if !v.r.byTrace(v.span.TraceID(), now) {
			res.wait = waitBinding
			return
		}
		s.fillTracedSpan(sh, j, v, t)
	case visitSpanLink:
		if !v.r.linkedFrom(v.span, now) {
			res.wait = waitBinding
			return
		}
		s.fillTracedSpan(sh, j, v, t)
	case visitLogTraceKey:
		r := s.index.startByTrace(sh, v.key, v.id, v.log.TraceID(), now, t)
		if r == nil {
			res.wait = waitBinding
			return
		}
		fillReqID(r, v.log.Attributes(), t)
		s.fillLog(sh, r, v.log, t)
	case visitSpanTraceKey:
		if v.r = s.index.startByTrace(sh, v.key, v.id, v.span.TraceID(), now, t); v.r == nil {
			res.wait = waitBinding
			return
		}
		s.fillTracedSpan(sh, j, v, t)
	}
}

// fillTracedSpan gives a span found through a trace (its own, or one it
// links to) its request's req_id, observes it, and fills it.
func (s *stitcher) fillTracedSpan(sh *shard, j *job, v *visit, t *tally) {
	fillReqID(v.r, v.span.Attributes(), t)
	s.observeSpan(j.origins[v.origin], v.span, v.r, j.events[v.at], t)
	s.fillSpan(sh, v.r, v.span, t)
}

// fillReqID gives a record found through its trace its request's req_id,
// and says when that is its trace's key.
func fillReqID(r *request, attrs pcommon.Map, t *tally) {
	if r.byTraceKey() {
		putTraceKey(attrs, r.id())
		t.filled[filledTraceKey]++
		return
	}
	attrs.PutStr(golden.ReqID, r.id())
	golden.Filled(attrs, golden.ReqID)
	t.filled[filledReqID]++
}

// keyByTrace gives a record with trace context and no req_id its trace's
// key as req_id, and reports whether it did.
func keyByTrace(trace pcommon.TraceID, attrs pcommon.Map) bool {
	if _, present := attrs.Get(golden.ReqID); present || trace.IsEmpty() {
		return false
	}
	putTraceKey(attrs, golden.TraceKey(trace))
	return true
}

// heldLog and heldSpan are the trace and attributes of a held record.
func heldLog(held plog.Logs) (pcommon.TraceID, pcommon.Map) {
	_, _, lr := parkedLog(held)
	return lr.TraceID(), lr.Attributes()
}

func heldSpan(held ptrace.Traces) (pcommon.TraceID, pcommon.Map) {
	_, _, span := parkedSpan(held)
	return span.TraceID(), span.Attributes()
}

// ownTraceKeyed reports whether a record's req_id is its own trace's key.
func ownTraceKeyed(trace pcommon.TraceID, attrs pcommon.Map) bool {
	if !golden.KeyedByTrace(attrs) || trace.IsEmpty() {
		return false
	}
	id, _ := reqIDOf(attrs)
	return id == golden.TraceKey(trace)
}

func putTraceKey(attrs pcommon.Map, key string) {
	attrs.PutStr(golden.ReqID, key)
	golden.Filled(attrs, golden.ReqID)
	attrs.PutStr(golden.ReqIDFrom, golden.ReqIDFromTrace)
}

// fillLog fills a log record of request r from what r knows.
func (s *stitcher) fillLog(sh *shard, r *request, lr plog.LogRecord, t *tally) {
	attrs := lr.Attributes()
	carry(sh, r, attrs, t)
	s.markDetached(r, lr.TraceID(), attrs, t)
}

// fillSpan fills a span of request r from what r knows, and links a span
// of another trace than r's primary one to its primary root.
func (s *stitcher) fillSpan(sh *shard, r *request, span ptrace.Span, t *tally) {
	attrs := span.Attributes()
	carry(sh, r, attrs, t)
	if s.markDetached(r, span.TraceID(), attrs, t) && !linksTo(span, r.primaryTrace(), r.rootSpan) {
		link := span.Links().AppendEmpty()
		link.SetTraceID(r.primaryTrace())
		link.SetSpanID(r.rootSpan)
	}
}

// linksTo reports whether span already links to the span of trace.
func linksTo(span ptrace.Span, trace pcommon.TraceID, to pcommon.SpanID) bool {
	for _, link := range span.Links().All() {
		if link.TraceID() == trace && link.SpanID() == to {
			return true
		}
	}
	return false
}
