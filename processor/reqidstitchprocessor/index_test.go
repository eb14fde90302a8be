package reqidstitchprocessor

import (
	"encoding/binary"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/golden"
)

func TestIndexBindsAndPicksTheEarliestRoot(t *testing.T) {
	x := newTestIndex(10, time.Minute, 1)
	c := &x.counts
	r := x.getOrAdd(reqA, 0)
	assert.Equal(t, 0, x.bind(r, traceID(1)))
	assert.Equal(t, 1, x.bind(r, traceID(2)))
	assert.Equal(t, 0, x.bind(r, traceID(1)), "binding twice is a no-op")
	assert.Same(t, r, x.byTraceID(traceID(2), 0))

	r.observeRoot(1, spanID(2), 20, golden.EventHash{2})
	assert.Equal(t, traceID(2), r.primaryTrace())
	r.observeRoot(0, spanID(1), 10, golden.EventHash{1})
	assert.Equal(t, traceID(1), r.primaryTrace(), "an earlier root takes over")
	r.observeRoot(1, spanID(2), 20, golden.EventHash{2})
	assert.Equal(t, traceID(1), r.primaryTrace())
	assert.Equal(t, golden.EventHash{1}, r.rootEvent)

	// A trace stays with the first request that claimed it.
	other := x.getOrAdd(reqB, 0)
	x.bind(other, traceID(1))
	assert.Same(t, r, x.byTraceID(traceID(1), 0))
	assert.Equal(t, int64(2), c.tracked)
}

func TestIndexBoundsPerRequest(t *testing.T) {
	x := newTestIndex(10, time.Minute, 1)
	r := x.getOrAdd(reqA, 0)
	for i := range maxTracesPerRequest + 5 {
		x.bind(r, pcommon.TraceID{byte(i), 1})
	}
	assert.Equal(t, maxTracesPerRequest, int(r.ntraces))
	assert.Equal(t, -1, x.bind(r, pcommon.TraceID{0xff}))
	for i := range maxSpansPerRequest + 5 {
		r.keep(spanRef{span: pcommon.SpanID{byte(i)}})
	}
	assert.Len(t, r.spans, maxSpansPerRequest)
}

func TestIndexEvictsLeastRecentlySeen(t *testing.T) {
	x := newTestIndex(2, time.Minute, 1)
	c := &x.counts
	a := x.getOrAdd(reqA, 1)
	x.bind(a, traceID(1))
	x.getOrAdd(reqB, 2)
	x.get(reqA, 3) // A is now the most recent
	x.getOrAdd("req-c", 4)
	assert.Nil(t, x.get(reqB, 5), "B was least recently seen")
	assert.NotNil(t, x.get(reqA, 5))
	assert.Equal(t, int64(1), c.evicted[tableRequests][evictCapacity])

	x.expire(5 + int64(time.Minute))
	assert.Equal(t, 1, x.len(), "C, seen at 4, is past the TTL; A, seen at 5, is not")
	x.expire(6 + int64(time.Minute))
	assert.Equal(t, 1, x.len(), "A is past the TTL too, but the next scan is due a sixteenth of the TTL later")
	x.expire(5 + int64(time.Minute) + int64(time.Minute)/expireScans)
	assert.Zero(t, x.len())
	assert.Nil(t, x.byTraceID(traceID(1), 0), "the trace binding goes with its request")
	assert.Zero(t, x.traces())
	assert.Equal(t, int64(2), c.evicted[tableRequests][evictTTL])
	assert.Zero(t, c.tracked)
}

func TestEvictionThroughTheProcessor(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxRequests = 1 })
	rootB := rootA
	rootB.trace, rootB.span, rootB.attrs = traceID(2), spanID(2), reqIDAttr(reqB)
	h.consumeTraces(tracesOf(rootA, rootB))
	assert.Equal(t, int64(1), h.counter("processor_reqidstitch_evicted", "table", "requests", "reason", "capacity"))
	assert.Equal(t, int64(1), h.counter("processor_reqidstitch_tracked_requests"))

	h.tick(6 * time.Minute)
	assert.Equal(t, int64(1), h.counter("processor_reqidstitch_evicted", "table", "requests", "reason", "ttl"))
	assert.Zero(t, h.counter("processor_reqidstitch_tracked_requests"))
}

func TestServicesTableIsBounded(t *testing.T) {
	s := newServices()
	for i := range maxServices + 10 {
		s.id("svc-" + strconv.Itoa(i))
	}
	assert.Len(t, s.ids, maxServices-1)
	id := s.id("one too many")
	assert.Equal(t, serviceID(0), id)
	s.markLogsNoContext(id)
	assert.False(t, s.keepsSpans(id), "the overflow id never keeps spans")
}

// A million concurrent request ids: the index stays at max_requests, every
// eviction is counted, and the heap stays bounded.
func TestIndexBoundedWithAMillionRequests(t *testing.T) {
	const total, limit = 1_000_000, 100_000
	x := newTestIndex(limit, time.Hour, shardCount(limit, 2))
	c := &x.counts
	var trace pcommon.TraceID
	for i := range total {
		binary.BigEndian.PutUint64(trace[:], uint64(i))
		r := x.getOrAdd("req-celery-"+strconv.Itoa(i), int64(i))
		x.bind(r, trace)
		r.observeRoot(0, pcommon.SpanID{1}, 1, golden.EventHash{})
	}
	assert.Equal(t, limit, x.len())
	assert.Equal(t, limit, x.traces())
	assert.Equal(t, int64(total-limit), c.evicted[tableRequests][evictCapacity])
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// Generous: the index itself takes about 30 MB for 100k requests here.
	assert.Less(t, ms.HeapAlloc, uint64(200<<20), "heap after a million ids")
	runtime.KeepAlive(x)
}

// The request fills a 128-byte size class: a field more, and it takes 144.
func TestRequestFitsItsSizeClass(t *testing.T) {
	assert.Equal(t, uintptr(128), unsafe.Sizeof(request{}))
}

func TestIndexCarriesKnownFieldsInOneString(t *testing.T) {
	x := newTestIndex(10, time.Minute, 1)
	r := x.getOrAdd(reqA, 0)
	r.setKnown(&x.shards[r.shard].models, "a1b2c3d4", "llama3-8b-v2.1.4")
	assert.Equal(t, reqA, r.id())
	assert.Equal(t, "a1b2c3d4", r.inputHash())
	assert.Equal(t, "llama3-8b-v2.1.4", r.modelVer(&x.shards[r.shard].models))
	assert.Equal(t, reqA+"a1b2c3d4", r.text, "an interned model_ver stays out of the text")

	// Past the model table's bound, the model_ver goes in the text.
	for i := range maxInterned {
		x.shards[r.shard].models.id("model-" + strconv.Itoa(i))
	}
	r.setKnown(&x.shards[r.shard].models, "", "rare-model-v1")
	assert.Equal(t, "", r.inputHash())
	assert.Equal(t, "rare-model-v1", r.modelVer(&x.shards[r.shard].models))
	assert.Equal(t, reqA+"rare-model-v1", r.text)

	// A value past maxKnownBytes is a disagreement: never kept, never filled.
	assert.Empty(t, r.learn(knownInput, "", strings.Repeat("f", maxKnownBytes+1)))
	assert.NotZero(t, r.flags&knownInput)
}

func TestIndexKeepsTracesBeyondTheInlineTwo(t *testing.T) {
	x := newTestIndex(10, time.Minute, 1)
	r := x.getOrAdd(reqA, 0)
	for i := range 4 {
		assert.Equal(t, i, x.bind(r, traceID(byte(i+1))))
	}
	for i := range 4 {
		assert.Equal(t, traceID(byte(i+1)), r.trace(i))
		assert.Same(t, r, x.byTraceID(traceID(byte(i+1)), 0))
	}
	r.observeRoot(3, spanID(1), 1, golden.EventHash{})
	assert.Equal(t, traceID(4), r.primaryTrace())
}

// testIndex drives an index from one goroutine, as the owner of every shard.
type testIndex struct {
	*index
	counts tally
}

func newTestIndex(maxRequests int, ttl time.Duration, shards int) *testIndex {
	return &testIndex{index: newIndex(maxRequests, int64(ttl), shards)}
}

func (x *testIndex) shard(id string) (*shard, uint64) {
	n, key := x.shardOf(id)
	return &x.shards[n], key
}

func (x *testIndex) getOrAdd(id string, now int64) *request {
	sh, key := x.shard(id)
	return x.index.getOrAdd(sh, key, id, now, &x.counts)
}

func (x *testIndex) get(id string, now int64) *request {
	sh, key := x.shard(id)
	return sh.get(key, id, now)
}

func (x *testIndex) byTraceID(t pcommon.TraceID, now int64) *request {
	if r := x.traceRequest(t); r != nil && r.byTrace(t, now) {
		return r
	}
	return nil
}

func (x *testIndex) expire(now int64) {
	for i := range x.shards {
		x.index.expire(&x.shards[i], now, &x.counts)
	}
}

// len is the number of requests tracked.
func (x *testIndex) len() int {
	n := 0
	for i := range x.shards {
		n += len(x.shards[i].byID)
	}
	return n
}

// traces is the number of traces bound.
func (x *testIndex) traces() int {
	n := 0
	for i := range x.stripes {
		n += len(x.stripes[i].byTrace)
	}
	return n
}
