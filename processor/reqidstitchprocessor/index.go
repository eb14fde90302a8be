package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"hash/maphash"
	"math"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/golden"
)

// Per-request bounds: a hostile req_id shared by endless traces or spans costs a fixed amount.
const (
	maxTracesPerRequest = 16
	maxSpansPerRequest  = 32
)

// request is what the index knows about one req_id. It is kept small: the
// index holds up to max_requests of them, so it is laid out to fill a 128-byte
// size class exactly: its strings share one allocation and one header, its
// first two traces (most requests have no more) sit inline, and its small
// fields share one word (see TestRequestFitsItsSizeClass).
type request struct {
	// text is the req_id, then the input_hash its records carry, then a
	// model_ver the model table could not take (see known).
	text string
	seen int64 // arrival time (unix ns) of its latest record, for the TTL

	traces [2]pcommon.TraceID // the first traces bound to it, in order
	more   *[]pcommon.TraceID // the traces beyond two; nil for most requests
	// The primary root: the earliest root span seen.
	rootStart pcommon.Timestamp
	rootSpan  pcommon.SpanID
	rootEvent golden.EventHash

	// spans of services that log without trace context, to fill those logs with
	// the span that covers them; other services' logs carry their own context.
	spans []spanRef

	hashLen uint16  // text[idLen():][:hashLen] is the input_hash
	model   modelID // model_ver from the model table; 0: in text, or none
	idLen1  uint8   // len(req_id)-1: a usable req_id has 1 to golden.MaxReqIDBytes bytes
	primary int8    // trace(primary) is the primary trace; -1 until a root span is seen
	ntraces uint8
	// ambiguous has the knownInput and knownModel flags of the fields the
	// request's records disagree on.
	ambiguous uint8
}

func newRequest(id string, now int64) *request {
	// A clone: the id may be a slice of a body that the index must not pin.
	return &request{text: strings.Clone(id), idLen1: uint8(len(id) - 1), seen: now, primary: -1}
}

func (r *request) id() string { return r.text[:r.idLen()] }

func (r *request) idLen() int { return int(r.idLen1) + 1 }

type spanRef struct {
	start   pcommon.Timestamp
	span    pcommon.SpanID
	micros  uint32 // duration in µs, at most about 71 minutes: 24 bytes instead of 32
	service serviceID
	trace   uint8 // index in request.traces
}

func newSpanRef(start, end pcommon.Timestamp, span pcommon.SpanID, svc serviceID, trace int) spanRef {
	micros := uint64(0)
	if end > start {
		micros = min(uint64(end-start)/1000, math.MaxUint32)
	}
	return spanRef{start: start, span: span, micros: uint32(micros), service: svc, trace: uint8(trace)}
}

func (s spanRef) end() pcommon.Timestamp { return s.start + pcommon.Timestamp(s.micros)*1000 }

func (r *request) hasPrimary() bool { return r.primary >= 0 }

func (r *request) primaryTrace() pcommon.TraceID { return r.trace(int(r.primary)) }

// trace returns the i-th trace bound to r.
func (r *request) trace(i int) pcommon.TraceID {
	if i < len(r.traces) {
		return r.traces[i]
	}
	return (*r.more)[i-len(r.traces)]
}

// traceIndex returns the position of t among r's traces, or -1.
func (r *request) traceIndex(t pcommon.TraceID) int {
	for i := range int(r.ntraces) {
		if r.trace(i) == t {
			return i
		}
	}
	return -1
}

// addTrace binds t to r as its next trace; the caller checks the bound.
func (r *request) addTrace(t pcommon.TraceID) {
	if int(r.ntraces) < len(r.traces) {
		r.traces[r.ntraces] = t
	} else {
		if r.more == nil {
			r.more = new([]pcommon.TraceID)
		}
		*r.more = append(*r.more, t)
	}
	r.ntraces++
}

// cover returns the innermost kept span of service svc that covers ts.
func (r *request) cover(svc serviceID, ts pcommon.Timestamp) (spanRef, bool) {
	var best spanRef
	found := false
	for _, s := range r.spans {
		if s.service != svc || ts < s.start || ts > s.end() {
			continue
		}
		if !found || s.micros < best.micros {
			best, found = s, true
		}
	}
	return best, found
}

// index binds req_id ↔ trace ids. It is bounded by max_requests and by the
// TTL after a request's last record.
//
// Both maps are keyed by a seeded 64-bit hash instead of the id: their
// entries take 16 bytes instead of 24 or 32, and a hit is checked against the
// request's own ids. Two ids that collide (about one in 2^64 per pair, and
// not steerable without the seed) leave the second one untracked.
//
// There is no recency list (16 bytes a request): at capacity the least
// recently seen of evictionSample requests is evicted, as Redis approximates
// LRU, and the TTL is a periodic scan of the requests.
type index struct {
	max     int
	ttl     int64
	seed    maphash.Seed
	byID    map[uint64]*request
	byTrace map[uint64]*request
	models  modelTable
	tally   *tally
	// nextScan is when expire next scans the requests (unix ns).
	nextScan int64
}

// evictionSample is how many requests an eviction at capacity compares: a
// map iteration starts at a random entry, so they are a random sample, and
// the least recently seen of 8 is in the oldest ninth on average.
const evictionSample = 8

func newIndex(maxRequests int, ttl int64, t *tally) *index {
	return &index{
		max:     maxRequests,
		ttl:     ttl,
		seed:    maphash.MakeSeed(),
		byID:    make(map[uint64]*request),
		byTrace: make(map[uint64]*request),
		models:  newModelTable(),
		tally:   t,
	}
}

func (x *index) idKey(id string) uint64 { return maphash.String(x.seed, id) }

func (x *index) traceKey(t pcommon.TraceID) uint64 { return maphash.Comparable(x.seed, t) }

func (x *index) len() int { return len(x.byID) }

// get returns the request of id, marking it seen at now; nil when unknown.
func (x *index) get(id string, now int64) *request {
	r := x.byID[x.idKey(id)]
	if r == nil || r.id() != id {
		return nil
	}
	r.seen = now
	return r
}

// getOrAdd returns the request of id, tracking it if it is new; nil in the
// rare case that id collides with a tracked one. id is a usable req_id (see reqIDOf).
func (x *index) getOrAdd(id string, now int64) *request {
	key := x.idKey(id)
	if r := x.byID[key]; r != nil {
		if r.id() != id {
			return nil
		}
		r.seen = now
		return r
	}
	if len(x.byID) >= x.max {
		x.evictOne()
	}
	r := newRequest(id, now)
	x.byID[key] = r
	x.tally.tracked++
	return r
}

// evictOne evicts the least recently seen of a sample of the requests.
func (x *index) evictOne() {
	var victim *request
	n := 0
	for _, r := range x.byID {
		if victim == nil || r.seen < victim.seen {
			victim = r
		}
		if n++; n == evictionSample {
			break
		}
	}
	x.remove(victim, evictCapacity)
}

// byTraceID returns the request bound to trace t, marking it seen; nil when unknown.
func (x *index) byTraceID(t pcommon.TraceID, now int64) *request {
	r := x.byTrace[x.traceKey(t)]
	if r == nil || r.traceIndex(t) < 0 {
		return nil
	}
	r.seen = now
	return r
}

// bind binds trace t to r and returns its position among r's traces, or -1
// when r is full. A trace stays bound to the first request that claimed it.
func (x *index) bind(r *request, t pcommon.TraceID) int {
	if i := r.traceIndex(t); i >= 0 {
		return i
	}
	if r.ntraces >= maxTracesPerRequest {
		return -1
	}
	r.addTrace(t)
	if key := x.traceKey(t); x.byTrace[key] == nil {
		x.byTrace[key] = r
	}
	return int(r.ntraces) - 1
}

// observeRoot makes the root span at trace position ti the primary root if it
// started before the current one.
func (x *index) observeRoot(r *request, ti int, span pcommon.SpanID, start pcommon.Timestamp, event golden.EventHash) {
	if r.hasPrimary() && start >= r.rootStart {
		return
	}
	r.primary, r.rootSpan, r.rootStart, r.rootEvent = int8(ti), span, start, event
}

// keep remembers a span for filling logs of its service.
func (x *index) keep(r *request, s spanRef) {
	for _, k := range r.spans {
		if k.span == s.span && k.trace == s.trace {
			return
		}
	}
	if len(r.spans) < maxSpansPerRequest {
		r.spans = append(r.spans, s)
	}
}

// expireScans is how many TTL scans an index makes per TTL: a scan visits
// every request (about 8 ms per 100,000), so a request leaves between the TTL
// and 17/16 of it after its last record.
const expireScans = 16

// expire drops the requests not seen for the TTL, at most once per ttl/expireScans.
func (x *index) expire(now int64) {
	if now < x.nextScan {
		return
	}
	x.nextScan = now + x.ttl/expireScans
	for _, r := range x.byID {
		if now-r.seen > x.ttl {
			x.remove(r, evictTTL)
		}
	}
}

func (x *index) remove(r *request, reason evictReason) {
	delete(x.byID, x.idKey(r.id()))
	for i := range int(r.ntraces) {
		if key := x.traceKey(r.trace(i)); x.byTrace[key] == r {
			delete(x.byTrace, key)
		}
	}
	x.tally.evicted[tableRequests][reason]++
	x.tally.tracked--
}

// serviceID is a service.name interned by the services table; 0 stands for
// every service beyond the table's bound.
type serviceID uint16

const maxServices = 4096

// services interns service names and remembers which services log without
// trace context: only their spans are worth keeping for filling.
type services struct {
	ids           map[string]serviceID
	logsNoContext []bool // by serviceID
}

func newServices() *services {
	return &services{ids: map[string]serviceID{}, logsNoContext: []bool{false}}
}

func (s *services) id(name string) serviceID {
	if id, ok := s.ids[name]; ok {
		return id
	}
	if len(s.logsNoContext) >= maxServices {
		return 0
	}
	id := serviceID(len(s.logsNoContext))
	s.ids[strings.Clone(name)] = id
	s.logsNoContext = append(s.logsNoContext, false)
	return id
}

func (s *services) markLogsNoContext(id serviceID) {
	if id != 0 {
		s.logsNoContext[id] = true
	}
}

func (s *services) keepsSpans(id serviceID) bool { return s.logsNoContext[id] }
