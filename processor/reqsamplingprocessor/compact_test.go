package reqsamplingprocessor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

// Records that wait for their decision pin a fraction of the heap when
// they wait encoded, and the kept ones come out as they went in.
func TestWaitingRecordsAreHeldEncoded(t *testing.T) {
	const batches, perBatch = 100, 100
	waitingHeap := func(compact bool) int {
		cfg := defaultConfig()
		cfg.CompactWaiting = compact
		cfg.BasePercentage = 100
		h := newHarness(t, cfg)
		before := heapInUse()
		for b := range batches {
			recs := make([]rec, perBatch)
			for i := range recs {
				n := b*perBatch + i
				recs[i] = rec{reqID: fmt.Sprintf("req-%06d", n/4), traceID: byte(n), stage: "model/forward", attrs: map[string]any{
					"gen_ai.request.model": "llama3-8b", "duration_ms": int64(n), "tenant": "acme", "route": "/v1/chat/completions",
					"tokens.in": int64(523), "tokens.out": int64(87), "cache.hit": n%3 == 0, "queue.depth": 3.5,
				}}
			}
			h.send(ptrace.NewTraces(), logsOf(recs...))
		}
		h.tick()
		held := heapInUse() - before
		h.wait(cfg.DecisionWait)

		o := h.out()
		require.Len(t, o.logs, batches*perBatch/4)
		first := o.logs["req-000001"]
		require.Len(t, first, 4)
		for i, attrs := range first {
			d, _ := attrs.Get("duration_ms")
			assert.EqualValues(t, 4+i, d.Int(), "records keep their order and values")
			hit, _ := attrs.Get("cache.hit")
			assert.Equal(t, (4+i)%3 == 0, hit.Bool())
			policy, _ := attrs.Get(golden.SamplingPolicy)
			assert.NotEmpty(t, policy.Str(), "kept records are annotated")
		}
		return held
	}
	decoded := waitingHeap(false)
	encoded := waitingHeap(true)
	t.Logf("heap pinned by %d waiting records: %d KiB decoded, %d KiB encoded", batches*perBatch, decoded>>10, encoded>>10)
	assert.Less(t, 2*encoded, decoded, "waiting encoded pins less than half the heap")
}
