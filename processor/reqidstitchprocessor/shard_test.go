package reqidstitchprocessor

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestShardCount(t *testing.T) {
	assert.Equal(t, 1, shardCount(100_000, 1))
	assert.Equal(t, 2, shardCount(100_000, 2))
	assert.Equal(t, 3, shardCount(100_000, 3))
	assert.Equal(t, maxShards, shardCount(100_000, 256))
	assert.Equal(t, 1, shardCount(1, 2), "max_requests: 1 is one shard of one request")
}

// Each shard holds its part of max_requests and counts what it evicts: the
// index as a whole holds max_requests.
func TestIndexShardsHoldTheirPartOfMaxRequests(t *testing.T) {
	const limit, total = 1000, 20_000
	x := newTestIndex(limit, time.Hour, 4)
	for i := range total {
		x.getOrAdd("req-"+strconv.Itoa(i), int64(i))
	}
	for i := range x.shards {
		assert.Equal(t, limit/4, len(x.shards[i].byID), "shard %d", i)
	}
	assert.Equal(t, int64(total-limit), x.counts.evicted[tableRequests][evictCapacity])
	assert.Equal(t, int64(limit), x.counts.tracked)
}

// A trace bound in one shard is found from any goroutine; once its request is
// evicted, a lookup that raced the eviction finds nothing.
func TestIndexTraceLookupAcrossShards(t *testing.T) {
	// Room for all 50 requests in any one shard: the seed spreads them at
	// random, and 100 over 8 shards evicted one now and then.
	x := newTestIndex(8*50, time.Hour, 8)
	var traces []pcommon.TraceID
	for i := range 50 {
		r := x.getOrAdd("req-"+strconv.Itoa(i), 0)
		tr := pcommon.TraceID{byte(i), 7}
		x.bind(r, tr)
		traces = append(traces, tr)
	}
	for i, tr := range traces {
		r := x.byTraceID(tr, 1)
		if assert.NotNil(t, r) {
			assert.Equal(t, "req-"+strconv.Itoa(i), r.id())
		}
	}
	r := x.byTraceID(traces[0], 1)
	x.remove(&x.shards[r.shard], r, evictCapacity, &x.counts)
	assert.Nil(t, x.byTraceID(traces[0], 2))
	assert.Equal(t, -1, r.traceIndex(traces[0]), "a removed request binds nothing")
	assert.False(t, r.hasPrimary())
}

// The S1–S3 mix from four concurrent callers through one component (run it
// with -race): each caller's requests are its own, as a receiver's
// connections would send them, and every record ends up as stitched as from
// one caller.
func TestMixFromConcurrentCallers(t *testing.T) {
	const callers = 4
	reqs := generateMix(t, mixRequests)
	// Callers interleave chunks: an engine process's ring must hold the spans
	// of every caller's chunk in flight, or a GPU event misses its span (as
	// it would in a collector fed beyond spans_per_process).
	h := newHarness(t, func(c *Config) { c.GPUAttribution.SpansPerProcess = 100_000 })
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b mixBatches
			for i := c * mixChunk; i < len(reqs); i += callers * mixChunk {
				td, ld := b.build(reqs[i:min(i+mixChunk, len(reqs))])
				assert.NoError(t, h.traces.ConsumeTraces(context.Background(), td))
				assert.NoError(t, h.logs.ConsumeLogs(context.Background(), ld))
			}
		}()
	}
	wg.Wait()
	h.tick(time.Minute)
	st := measureMix(t, reqs, h.outSpans(), h.outLogs())
	assert.GreaterOrEqual(t, st.bothShare(), 0.999, "share of request records with req_id and trace context")
	assert.Zero(t, st.wrongReqID, "no record is given another request's req_id")
	assert.Zero(t, st.wrongTrace, "no record is given another request's trace")
	assert.Zero(t, st.noiseWithReqID, "noise stays unbound")
	assert.Equal(t, st.asyncSpans, st.asyncSpansLinked, "every async span is linked to its request's primary root")
	assert.Equal(t, st.asyncLogs, st.asyncLogsMarked, "every async log names its request's root")
	assert.Positive(t, h.counter("processor_reqidstitch_records_filled", "direction", "gpu"))
	assert.Zero(t, h.counter("processor_reqidstitch_hold_released", "outcome", "expired"))
}
