package reqidstitchprocessor

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/internal/custody/custodytest"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/processor/reqidstitchprocessor/internal/metadata"
)

// mixSource generates the S1–S3 mix without end, a chunk at a time.
type mixSource struct {
	gen     *workload.Generator
	batches mixBatches
	n       int
}

func newMixSource(tb testing.TB) *mixSource {
	gen, err := workload.NewGenerator(workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12, Duration: time.Hour, Seed: 1,
	})
	require.NoError(tb, err)
	return &mixSource{gen: gen}
}

func (m *mixSource) next(requests int) (ptrace.Traces, plog.Logs) {
	reqs := make([]*mixRequest, requests)
	for i := range reqs {
		m.n++
		r := &mixRequest{Request: m.gen.Next(t0.Add(time.Duration(m.n) * 2 * time.Millisecond)), tid: int64(m.n)}
		for _, s := range r.Spans {
			if s.Name == "model/forward" {
				r.gpuEvents = append(r.gpuEvents, gpuEventDuring(s, r.tid))
			}
		}
		reqs[i] = r
	}
	return m.batches.build(reqs)
}

// pipeline is a logs and a traces processor, as a collector runs them.
type pipeline struct {
	logs   processor.Logs
	traces processor.Traces
}

func (p pipeline) consume(tb testing.TB, td ptrace.Traces, ld plog.Logs) {
	ctx := context.Background()
	require.NoError(tb, p.traces.ConsumeTraces(ctx, td))
	require.NoError(tb, p.logs.ConsumeLogs(ctx, ld))
}

func startPipeline(tb testing.TB, f processor.Factory, cfg component.Config) pipeline {
	return startPipelineOn(tb, f, cfg, componenttest.NewNopHost())
}

// startPipelineOn starts the processors on host, whose extensions they may use.
func startPipelineOn(tb testing.TB, f processor.Factory, cfg component.Config, host component.Host) pipeline {
	ctx := context.Background()
	set := processortest.NewNopSettings(f.Type())
	logs, err := f.CreateLogs(ctx, set, cfg, consumertest.NewNop())
	require.NoError(tb, err)
	traces, err := f.CreateTraces(ctx, set, cfg, consumertest.NewNop())
	require.NoError(tb, err)
	require.NoError(tb, logs.Start(ctx, host))
	require.NoError(tb, traces.Start(ctx, host))
	tb.Cleanup(func() {
		require.NoError(tb, logs.Shutdown(ctx))
		require.NoError(tb, traces.Shutdown(ctx))
	})
	return pipeline{logs: logs, traces: traces}
}

// passthroughFactory is the pipeline without the processor: a processor that
// passes every batch on as it is, through the same processorhelper plumbing.
func passthroughFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithLogs(func(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
			return processorhelper.NewLogs(ctx, set, cfg, next, func(_ context.Context, ld plog.Logs) (plog.Logs, error) { return ld, nil }, mutatesData)
		}, metadata.LogsStability),
		processor.WithTraces(func(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
			return processorhelper.NewTraces(ctx, set, cfg, next, func(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) { return td, nil }, mutatesData)
		}, metadata.TracesStability))
}

// benchPool is the generator's mix as a collector receives it: OTLP protobuf,
// chunkRequests requests (about 1,300 spans and log records) per chunk.
type benchPool struct {
	traces, logs [][]byte
	records      []int
}

const (
	chunkRequests = 100
	poolChunks    = 40
	// benchMaxRequests is below the pool's 4,000 requests: each request is
	// evicted before the pool comes round to it again, so that every request is
	// new to the index, as in live traffic.
	benchMaxRequests = 2000
)

func newBenchPool(tb testing.TB) *benchPool { return newBenchPoolOf(tb, false) }

// newBenchPoolOf is the mix, and with traceOnly the same records without
// their req_id: the traffic of services that write none.
func newBenchPoolOf(tb testing.TB, traceOnly bool) *benchPool {
	src := newMixSource(tb)
	p := &benchPool{}
	for range poolChunks {
		td, ld := src.next(chunkRequests)
		if traceOnly {
			eachSpan(td, func(_ ptrace.ResourceSpans, _ ptrace.ScopeSpans, s ptrace.Span) { s.Attributes().Remove(golden.ReqID) })
			eachLog(ld, func(_ plog.ResourceLogs, _ plog.ScopeLogs, lr plog.LogRecord) { lr.Attributes().Remove(golden.ReqID) })
		}
		traces, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		require.NoError(tb, err)
		logs, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		require.NoError(tb, err)
		p.traces, p.logs = append(p.traces, traces), append(p.logs, logs)
		p.records = append(p.records, td.SpanCount()+ld.LogRecordCount())
	}
	return p
}

// BenchmarkStitch runs the pipeline without the processor and with it, side
// by side: each operation unmarshals one chunk of the mix, as a receiver
// would, and passes its traces, then its logs, through the pipeline.
//
// reqidstitch-keyed-by-trace is the same records without their req_id, as
// services that write none send them, without a hold: every request is keyed
// by its trace as it comes, as a service learned to be keyed by trace is
// (but for its probes).
func BenchmarkStitch(b *testing.B) {
	pool, traceOnly := newBenchPool(b), newBenchPoolOf(b, true)
	for _, v := range []struct {
		name    string
		factory processor.Factory
		pool    *benchPool
		hold    time.Duration
	}{
		{"baseline-passthrough", passthroughFactory(), pool, 2 * time.Second},
		{"reqidstitch", NewFactory(), pool, 2 * time.Second},
		{"reqidstitch-keyed-by-trace", NewFactory(), traceOnly, 0},
	} {
		b.Run(v.name, func(b *testing.B) {
			cfg := v.factory.CreateDefaultConfig().(*Config)
			cfg.MaxRequests = benchMaxRequests
			cfg.Hold.Duration = v.hold
			p := startPipeline(b, v.factory, cfg)
			pool := v.pool
			records, i := 0, 0
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(pool.traces[i%poolChunks])
				require.NoError(b, err)
				ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(pool.logs[i%poolChunks])
				require.NoError(b, err)
				p.consume(b, td, ld)
				records += pool.records[i%poolChunks]
				i++
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(records), "allocs/record")
		})
	}
}

// BenchmarkStitchParallel feeds the pipeline from as many goroutines as
// GOMAXPROCS (run it with -cpu 1,2): unmarshalling runs in parallel, the
// stitcher's state is one mutex, so this is how far the processor scales.
func BenchmarkStitchParallel(b *testing.B) {
	pool := newBenchPool(b)
	cfg := createDefaultConfig().(*Config)
	cfg.MaxRequests = benchMaxRequests
	p := startPipeline(b, NewFactory(), cfg)
	var next, records atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1)) % poolChunks
			td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(pool.traces[i])
			require.NoError(b, err)
			ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(pool.logs[i])
			require.NoError(b, err)
			p.consume(b, td, ld)
			records.Add(int64(pool.records[i]))
		}
	})
	b.ReportMetric(float64(records.Load())/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkHoldStorage is the cost of keeping held records across a crash,
// when most records are held: each chunk's logs arrive before its spans. The
// hold is in memory only, or written to a real file_storage before each call
// returns (p99_ack_µs: the sender's wait per call).
func BenchmarkHoldStorage(b *testing.B) {
	pool := newBenchPool(b)
	for _, v := range []struct {
		name   string
		stored bool
	}{{"baseline-memory", false}, {"file_storage", true}} {
		b.Run(v.name, func(b *testing.B) {
			cfg := createDefaultConfig().(*Config)
			cfg.MaxRequests = benchMaxRequests
			host := componenttest.NewNopHost()
			if v.stored {
				cfg.Storage, host = &custodytest.ID, custodytest.FileStorage(b, b.TempDir())
			}
			p := startPipelineOn(b, NewFactory(), cfg, host)
			ctx := context.Background()
			var acks []time.Duration
			timed := func(consume func() error) {
				start := time.Now()
				require.NoError(b, consume())
				acks = append(acks, time.Since(start))
			}
			records, i := 0, 0
			for b.Loop() {
				td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(pool.traces[i%poolChunks])
				require.NoError(b, err)
				ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(pool.logs[i%poolChunks])
				require.NoError(b, err)
				timed(func() error { return p.logs.ConsumeLogs(ctx, ld) })
				timed(func() error { return p.traces.ConsumeTraces(ctx, td) })
				records += pool.records[i%poolChunks]
				i++
			}
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
			slices.Sort(acks)
			b.ReportMetric(float64(acks[len(acks)*99/100].Microseconds()), "p99_ack_µs")
		})
	}
}

// settledHeap is the heap in use once the scratch the pools keep is gone: a
// second collection drops what the first left in the pools' victim caches.
// A call's scratch is kept per core, and how many cores kept one varies
// from run to run.
func settledHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestIndexMemoryPerRequest measures the binding index's heap per tracked
// request on the generator's mix (GPU attribution and rules off: their state
// is bounded apart, by process and by join key).
func TestIndexMemoryPerRequest(t *testing.T) {
	const requests = 20_000
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.GPUAttribution.Enabled = false
	cfg.Rules = nil
	p := startPipeline(t, f, cfg)
	src := newMixSource(t)
	// Warm up: the first requests teach the index which services log without trace context.
	td, ld := src.next(100)
	p.consume(t, td, ld)

	before := settledHeap()
	for range requests / 100 {
		td, ld := src.next(100)
		p.consume(t, td, ld)
	}
	perRequest := float64(settledHeap()-before) / requests
	t.Logf("index heap per tracked request: %.0f bytes", perRequest)
	// The request (128), its text (req_id and input_hash, 39 on average), its
	// kept spans (32), traces beyond two (8) and three map entries (~80):
	// 292–293 measured at 1 to 8 cores (364 with a recency list and a string
	// per field).
	require.LessOrEqual(t, perRequest, 300.0, "bytes per tracked request (issue 15)")
}
