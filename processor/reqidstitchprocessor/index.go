package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

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

	model   modelID // model_ver from its shard's model table; 0: in text, or none
	hashLen uint8   // text[idLen():][:hashLen] is the input_hash
	idLen1  uint8   // len(req_id)-1: a usable req_id has 1 to golden.MaxReqIDBytes bytes
	shard   uint8   // its shard in the index, set once: read by any goroutine
	primary int8    // trace(primary) is the primary trace; -1 until a root span is seen
	ntraces uint8
	// flags has the knownInput and knownModel bits of the fields the
	// request's records disagree on, and keyedByTrace.
	flags uint8
}

// keyedByTrace flags a request that carries no req_id: its id is the key
// of its trace (golden.TraceKey).
const keyedByTrace uint8 = 1 << 7

func (r *request) byTraceKey() bool { return r.flags&keyedByTrace != 0 }

func newRequest(id string, shard uint8, now int64) *request {
	// A clone: the id may be a slice of a body that the index must not pin.
	return &request{text: strings.Clone(id), idLen1: uint8(len(id) - 1), shard: shard, seen: now, primary: -1}
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
// Requests are sharded by a hash of their req_id, each shard with its own
// part of max_requests, and each shard is owned by one goroutine (see
// owner.go): only that goroutine reads or writes the shard's map and its
// requests, so no record waits for a lock on request state, and pipelines on
// several cores stitch at once. The trace → request map is striped apart, by
// a hash of the trace id, so that a record with only a trace id finds its
// request in any shard: a stripe's mutex guards only its map, and a request
// found through a trace is checked by its shard's owner (an eviction in
// between unbinds it).
//
// Both maps are keyed by a seeded 64-bit hash instead of the id: their
// entries take 16 bytes instead of 24 or 32, and a hit is checked against the
// request's own ids. Two ids that collide (about one in 2^64 per pair, and
// not steerable without the seed) leave the second one untracked.
//
// There is no recency list (16 bytes a request): at capacity the least
// recently seen of evictionSample requests of the shard is evicted, as Redis
// approximates LRU, and the TTL is a periodic scan of the requests.
type index struct {
	seed    maphash.Seed
	shards  []shard
	stripes []traceStripe
}

type shard struct {
	byID map[uint64]*request
	// models interns the model_ver values of the shard's requests.
	models modelTable
	max    int
	ttl    int64
	// nextScan is when expire next scans the requests (unix ns).
	nextScan int64
}

type traceStripe struct {
	mu      sync.Mutex
	byTrace map[uint64]*request
	// The stripes sit side by side: padding keeps each mutex off its
	// neighbours' cache line.
	_ [64]byte
}

// maxShards bounds the shards (a request records its shard in a byte): a
// shard's maps cost more per request the fewer requests they hold, and at
// 20,000 requests tracked 256 shards cost 304 B a request, 128 shards 297,
// 64 shards 292–294 (TestIndexMemoryPerRequest).
const maxShards = 64

// shardCount is a shard per core: each shard has an owner goroutine, and a
// batch hands each shard its records at once, so more shards than cores
// would add hand-offs without adding cores. It is at most max_requests (a
// shard is bounded by its part of it) and maxShards.
func shardCount(maxRequests, cores int) int {
	return max(1, min(cores, maxShards, maxRequests))
}

// evictionSample is how many requests an eviction at capacity compares: a
// map iteration starts at a random entry, so they are a random sample, and
// the least recently seen of 8 is in the oldest ninth on average.
const evictionSample = 8

func newIndex(maxRequests int, ttl int64, shards int) *index {
	x := &index{
		seed:    maphash.MakeSeed(),
		shards:  make([]shard, shards),
		stripes: make([]traceStripe, shards),
	}
	for i := range x.shards {
		// Shard i holds its part of max_requests, the first ones one more.
		max := maxRequests / shards
		if i < maxRequests%shards {
			max++
		}
		x.shards[i] = shard{byID: make(map[uint64]*request), models: newModelTable(), max: max, ttl: ttl}
		x.stripes[i].byTrace = make(map[uint64]*request)
	}
	return x
}

func (x *index) idKey(id string) uint64 { return maphash.String(x.seed, id) }

func (x *index) traceKey(t pcommon.TraceID) uint64 { return maphash.Comparable(x.seed, t) }

func (x *index) stripe(key uint64) *traceStripe { return &x.stripes[key%uint64(len(x.stripes))] }

// shardOf returns the number of id's shard, and id's key.
func (x *index) shardOf(id string) (int, uint64) {
	key := x.idKey(id)
	return int(key % uint64(len(x.shards))), key
}

// traceRequest returns the request trace t was bound to, nil when unknown.
// Only its shard's owner may read it: checked (byTrace), as it may have been
// evicted since.
func (x *index) traceRequest(t pcommon.TraceID) *request {
	key := x.traceKey(t)
	st := x.stripe(key)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byTrace[key]
}

// byTrace checks that r, which traceRequest found for trace t, is still
// bound to it, and marks it seen. Called by r's shard's owner.
func (r *request) byTrace(t pcommon.TraceID, now int64) bool {
	// Evicted since, or a colliding trace: remove unbinds every trace.
	if r.traceIndex(t) < 0 {
		return false
	}
	r.seen = now
	return true
}

// get returns the request of id (whose key and shard shardOf returned),
// marking it seen at now; nil when unknown.
func (sh *shard) get(key uint64, id string, now int64) *request {
	r := sh.byID[key]
	if r == nil || r.id() != id {
		return nil
	}
	r.seen = now
	return r
}

// getOrAdd returns the request of id, tracking it in its shard sh (as
// shardOf returned it) if it is new; nil in the rare case that id collides
// with a tracked one. id is a usable req_id (see reqIDOf).
func (x *index) getOrAdd(sh *shard, key uint64, id string, now int64, t *tally) *request {
	if r := sh.byID[key]; r != nil {
		if r.id() != id {
			return nil
		}
		r.seen = now
		return r
	}
	if len(sh.byID) >= sh.max {
		x.evictOne(sh, t)
	}
	r := newRequest(id, uint8(key%uint64(len(x.shards))), now)
	sh.byID[key] = r
	t.tracked++
	return r
}

// startByTrace returns the request that trace t keys (golden.TraceKey, id),
// tracking it and binding t to it if it is new: the request of a service
// that writes no req_id. nil when id collides with a tracked request that
// t is not bound to. Called by the owner of id's shard sh.
func (x *index) startByTrace(sh *shard, key uint64, id string, t pcommon.TraceID, now int64, tl *tally) *request {
	r := x.getOrAdd(sh, key, id, now, tl)
	if r == nil {
		return nil
	}
	if r.ntraces == 0 {
		r.flags |= keyedByTrace
	}
	if x.bind(r, t) < 0 {
		return nil
	}
	return r
}

// linkedFrom checks that r, which traceRequest found for a trace that span
// links to, is still bound to it, and marks it seen. Called by r's shard's
// owner.
func (r *request) linkedFrom(span ptrace.Span, now int64) bool {
	for _, link := range span.Links().All() {
		if r.traceIndex(link.TraceID()) >= 0 {
			r.seen = now
			return true
		}
	}
	return false
}

// evictOne evicts the least recently seen of a sample of the shard's requests.
func (x *index) evictOne(sh *shard, t *tally) {
	var victim *request
	n := 0
	for _, r := range sh.byID {
		if victim == nil || r.seen < victim.seen {
			victim = r
		}
		if n++; n == evictionSample {
			break
		}
	}
	x.remove(sh, victim, evictCapacity, t)
}

// bind binds trace t to r and returns its position among r's traces, or -1
// when r is full. A trace stays bound to the first request that claimed it.
// Called by r's shard's owner.
func (x *index) bind(r *request, t pcommon.TraceID) int {
	if i := r.traceIndex(t); i >= 0 {
		return i
	}
	if r.ntraces >= maxTracesPerRequest {
		return -1
	}
	r.addTrace(t)
	key := x.traceKey(t)
	st := x.stripe(key)
	st.mu.Lock()
	if st.byTrace[key] == nil {
		st.byTrace[key] = r
	}
	st.mu.Unlock()
	return int(r.ntraces) - 1
}

// observeRoot makes the root span at trace position ti the primary root if it
// started before the current one.
func (r *request) observeRoot(ti int, span pcommon.SpanID, start pcommon.Timestamp, event golden.EventHash) {
	if r.hasPrimary() && start >= r.rootStart {
		return
	}
	r.primary, r.rootSpan, r.rootStart, r.rootEvent = int8(ti), span, start, event
}

// keep remembers a span for filling logs of its service.
func (r *request) keep(s spanRef) {
	for _, k := range r.spans {
		if k.span == s.span && k.trace == s.trace {
			return
		}
	}
	if len(r.spans) < maxSpansPerRequest {
		r.spans = append(r.spans, s)
	}
}

// expireScans is how many TTL scans a shard makes per TTL: a scan visits
// every request (about 8 ms per 100,000), so a request leaves between the TTL
// and 17/16 of it after its last record.
const expireScans = 16

// expire drops the shard's requests not seen for the TTL, at most once per
// ttl/expireScans. Called by the shard's owner.
func (x *index) expire(sh *shard, now int64, t *tally) {
	if now < sh.nextScan {
		return
	}
	sh.nextScan = now + sh.ttl/expireScans
	for _, r := range sh.byID {
		if now-r.seen > sh.ttl {
			x.remove(sh, r, evictTTL, t)
		}
	}
}

// remove forgets r, and unbinds its traces so that a lookup that found it
// before finds nothing (see byTrace). Called by r's shard's owner.
func (x *index) remove(sh *shard, r *request, reason evictReason, t *tally) {
	delete(sh.byID, x.idKey(r.id()))
	for i := range int(r.ntraces) {
		key := x.traceKey(r.trace(i))
		st := x.stripe(key)
		st.mu.Lock()
		if st.byTrace[key] == r {
			delete(st.byTrace, key)
		}
		st.mu.Unlock()
	}
	r.ntraces, r.primary = 0, -1
	t.evicted[tableRequests][reason]++
	t.tracked--
}

// serviceID is a service.name interned by the services table; 0 stands for
// every service beyond the table's bound.
type serviceID uint16

const maxServices = 4096

// services interns service names and remembers, per service, whether it
// logs without trace context (only its spans are worth keeping for filling)
// and whether its traces get bound to a req_id (else its requests are keyed
// by their traces). Every pipeline reads it on every resource and record:
// names are looked up under a read lock, and the rest is atomic.
type services struct {
	mu            sync.RWMutex
	ids           map[string]serviceID
	logsNoContext [maxServices]atomic.Bool // by serviceID
	// unbound counts, by serviceID, the service's records that waited for a
	// binding in a row and left without one (reset by one that was bound);
	// passes counts the records of a service keyed by trace since.
	unbound [maxServices]atomic.Int32
	passes  [maxServices]atomic.Uint32
}

// A service is keyed by trace once unboundInARow of its records waited for
// a binding in vain, one after another: no other record of their traces
// carried a req_id within hold::duration. From then on its records whose
// trace is unbound take their trace as request key at once instead of
// waiting, except one in probeEvery, which still waits: when a probe is
// bound (a deploy made some service write req_id), the service waits again.
const (
	unboundInARow = 64
	probeEvery    = 16
)

// noteWaited learns from a record of service id that waited for a binding:
// bound, or not by the time it left.
func (s *services) noteWaited(id serviceID, bound bool) {
	if bound {
		if s.unbound[id].Load() != 0 {
			s.unbound[id].Store(0)
		}
		return
	}
	if s.unbound[id].Load() < unboundInARow {
		s.unbound[id].Add(1)
	}
}

// keysByTrace reports whether a record of service id whose trace is bound
// to no request should take its trace as key now rather than wait.
func (s *services) keysByTrace(id serviceID) bool {
	if s.unbound[id].Load() < unboundInARow {
		return false
	}
	return s.passes[id].Add(1)%probeEvery != 0
}

func newServices() *services {
	return &services{ids: map[string]serviceID{}}
}

func (s *services) id(name string) serviceID {
	s.mu.RLock()
	id, ok := s.ids[name]
	s.mu.RUnlock()
	if ok {
		return id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ids[name]; ok {
		return id
	}
	// ids has no entry for 0, the overflow id.
	if len(s.ids)+1 >= maxServices {
		return 0
	}
	id = serviceID(len(s.ids) + 1)
	s.ids[strings.Clone(name)] = id
	return id
}

func (s *services) markLogsNoContext(id serviceID) {
	// Loaded first: a store on every record would bounce the cache line between cores.
	if id != 0 && !s.logsNoContext[id].Load() {
		s.logsNoContext[id].Store(true)
	}
}

func (s *services) keepsSpans(id serviceID) bool { return s.logsNoContext[id].Load() }
