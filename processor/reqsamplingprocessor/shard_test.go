package reqsamplingprocessor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadatatest"
)

// Several pipelines' goroutines send at once, each batch spanning every
// shard, a request's spans and its log sent by two of them, while the
// shards tick: each request is still kept or dropped whole, and a request
// whose only error is on its log is kept.
func TestShardsKeepEveryRequestWhole(t *testing.T) {
	cfg := onlyPolicies(defaultConfig().Policies[0])
	cfg.BasePercentage = 50
	cfg.NumShards = 4
	h := newHarness(t, cfg)
	const senders, rounds, perBatch = 4, 10, 50
	const total = senders * rounds * perBatch
	failing := func(i int) bool { return i%7 == 0 }
	batch := func(sender, round int) (ptrace.Traces, plog.Logs) {
		first := (sender*rounds + round) * perBatch
		return requests(perBatch, func(i int, r *rec) {
			r.reqID, r.traceID = id(first+i), 0
			if failing(first + i) {
				r.severity = plog.SeverityNumberError
			}
		})
	}

	ticking, ticked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ticked)
		for {
			select {
			case <-ticking:
				return
			default:
				h.tick()
			}
		}
	}()
	var sending sync.WaitGroup
	for g := range senders {
		sending.Go(func() {
			ctx := context.Background()
			for round := range rounds {
				td, _ := batch(g, round)
				_, ld := batch((g+1)%senders, round)
				assert.NoError(t, h.traces.ConsumeTraces(ctx, td))
				assert.NoError(t, h.logs.ConsumeLogs(ctx, ld))
			}
		})
	}
	sending.Wait()
	close(ticking)
	<-ticked
	h.wait(cfg.DecisionWait)

	o := h.out()
	kept, failed := 0, 0
	for i := range total {
		if failing(i) {
			failed++
		}
		switch o.records(id(i)) {
		case 3:
			kept++
		case 0:
			assert.False(t, failing(i), "%s failed, and was dropped", id(i))
		default:
			t.Errorf("%s: %d of its 3 records kept: all or none", id(i), o.records(id(i)))
		}
	}
	assert.InDelta(t, failed+(total-failed)/2, kept, total/10)
	heat := h.heatMap()
	assert.Equal(t, DecisionCount{Kept: int64(failed)}, heat.Decisions["errors"])
	assert.Equal(t, DecisionCount{Kept: int64(kept - failed), Dropped: int64(total - kept)}, heat.Decisions[basePolicy])
	assert.Zero(t, heat.PendingRequests)
	assert.Zero(t, gauge(t, h, "pending_bytes"))
	records := func(signal, outcome string, v int) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: int64(v), Attributes: attribute.NewSet(attribute.String("signal", signal), attribute.String("outcome", outcome))}
	}
	metadatatest.AssertEqualProcessorReqsamplingRecords(t, h.tel, []metricdata.DataPoint[int64]{
		records("traces", "kept", 2*kept), records("traces", "dropped", 2*(total-kept)),
		records("logs", "kept", kept), records("logs", "dropped", total-kept),
	}, metricdatatest.IgnoreTimestamp())
}

// Each shard holds its share of max_requests and of the decision cache:
// requests that all hash to one shard are decided early, and their
// decisions evicted, where the same requests spread over the shards would
// all fit.
func TestLimitsArePerShard(t *testing.T) {
	cfg := defaultConfig()
	cfg.BasePercentage = 100
	cfg.NumShards = 2
	cfg.MaxRequests = 2
	cfg.DecisionCache.MaxEntries = 2
	h := newHarness(t, cfg)
	var first []string // requests of shard 0
	for i := 0; len(first) < 3; i++ {
		if h.sampler().shardOf(requestKey{reqID: id(i)}) == 0 {
			first = append(first, id(i))
		}
	}
	for _, reqID := range first {
		h.send(tracesOf(rec{reqID: reqID}), plog.NewLogs())
	}
	h.tick()
	o := h.out()
	assert.Equal(t, 1, o.records(first[0]), "decided early: its shard holds one request")
	assert.Equal(t, 1, o.records(first[1]))
	assert.Zero(t, o.records(first[2]), "still waiting")
	assert.Equal(t, int64(1), gauge(t, h, "pending_requests"))
	metadatatest.AssertEqualProcessorReqsamplingEarlyDecisions(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("reason", "max_requests"))},
	}, metricdatatest.IgnoreTimestamp())

	h.wait(time.Minute)
	assert.Equal(t, 1, h.out().records(first[2]))
	metadatatest.AssertEqualProcessorReqsamplingEvictions(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("state", "decision_cache"))},
	}, metricdatatest.IgnoreTimestamp())
}
