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
// index holds up to max_requests of them.
type request struct {
	id         string
	prev, next *request // recency list, least recently seen first
	seen       int64    // arrival time (unix ns) of its latest record, for the TTL

	traces  []pcommon.TraceID // every trace bound to it; traces[primary] is the primary trace
	primary int8              // -1 until a root span is seen
	// The primary root: the earliest root span seen.
	rootSpan  pcommon.SpanID
	rootStart pcommon.Timestamp
	rootEvent golden.EventHash

	// spans of services that log without trace context, to fill those logs with
	// the span that covers them; other services' logs carry their own context.
	spans []spanRef

	known known
}

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

func (r *request) primaryTrace() pcommon.TraceID { return r.traces[r.primary] }

// traceIndex returns the position of t in r.traces, or -1.
func (r *request) traceIndex(t pcommon.TraceID) int {
	for i := range r.traces {
		if r.traces[i] == t {
			return i
		}
	}
	return -1
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

// index binds req_id ↔ trace ids. It is bounded by max_requests (least
// recently seen evicted first) and by the TTL after a request's last record.
//
// Both maps are keyed by a seeded 64-bit hash instead of the id: their
// entries take 16 bytes instead of 24 or 32, and a hit is checked against the
// request's own ids. Two ids that collide (about one in 2^64 per pair, and
// not steerable without the seed) leave the second one untracked.
type index struct {
	max     int
	ttl     int64
	seed    maphash.Seed
	byID    map[uint64]*request
	byTrace map[uint64]*request
	oldest  *request
	newest  *request
	tally   *tally
}

func newIndex(maxRequests int, ttl int64, t *tally) *index {
	return &index{
		max:     maxRequests,
		ttl:     ttl,
		seed:    maphash.MakeSeed(),
		byID:    make(map[uint64]*request),
		byTrace: make(map[uint64]*request),
		tally:   t,
	}
}

func (x *index) idKey(id string) uint64 { return maphash.String(x.seed, id) }

func (x *index) traceKey(t pcommon.TraceID) uint64 { return maphash.Comparable(x.seed, t) }

func (x *index) len() int { return len(x.byID) }

// get returns the request of id, marking it seen at now; nil when unknown.
func (x *index) get(id string, now int64) *request {
	r := x.byID[x.idKey(id)]
	if r == nil || r.id != id {
		return nil
	}
	x.touch(r, now)
	return r
}

// getOrAdd returns the request of id, tracking it if it is new; nil in the
// rare case that id collides with a tracked one.
func (x *index) getOrAdd(id string, now int64) *request {
	key := x.idKey(id)
	if r := x.byID[key]; r != nil {
		if r.id != id {
			return nil
		}
		x.touch(r, now)
		return r
	}
	if len(x.byID) >= x.max {
		x.remove(x.oldest, evictCapacity)
	}
	// A clone: the id may be a slice of a body that the index must not pin.
	r := &request{id: strings.Clone(id), seen: now, primary: -1}
	x.byID[key] = r
	x.pushNewest(r)
	x.tally.tracked++
	return r
}

// byTraceID returns the request bound to trace t, marking it seen; nil when unknown.
func (x *index) byTraceID(t pcommon.TraceID, now int64) *request {
	r := x.byTrace[x.traceKey(t)]
	if r == nil || r.traceIndex(t) < 0 {
		return nil
	}
	x.touch(r, now)
	return r
}

// bind binds trace t to r and returns its position in r.traces, or -1 when r
// is full. A trace stays bound to the first request that claimed it.
func (x *index) bind(r *request, t pcommon.TraceID) int {
	if i := r.traceIndex(t); i >= 0 {
		return i
	}
	if len(r.traces) >= maxTracesPerRequest {
		return -1
	}
	r.traces = append(r.traces, t)
	if key := x.traceKey(t); x.byTrace[key] == nil {
		x.byTrace[key] = r
	}
	return len(r.traces) - 1
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

// expire drops the requests not seen for the TTL.
func (x *index) expire(now int64) {
	for x.oldest != nil && now-x.oldest.seen > x.ttl {
		x.remove(x.oldest, evictTTL)
	}
}

func (x *index) remove(r *request, reason evictReason) {
	delete(x.byID, x.idKey(r.id))
	for _, t := range r.traces {
		if key := x.traceKey(t); x.byTrace[key] == r {
			delete(x.byTrace, key)
		}
	}
	x.unlink(r)
	x.tally.evicted[tableRequests][reason]++
	x.tally.tracked--
}

func (x *index) touch(r *request, now int64) {
	r.seen = now
	if x.newest != r {
		x.unlink(r)
		x.pushNewest(r)
	}
}

func (x *index) pushNewest(r *request) {
	r.prev, r.next = x.newest, nil
	if x.newest != nil {
		x.newest.next = r
	} else {
		x.oldest = r
	}
	x.newest = r
}

func (x *index) unlink(r *request) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		x.oldest = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		x.newest = r.prev
	}
	r.prev, r.next = nil, nil
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
