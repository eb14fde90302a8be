package reqsamplingprocessor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/internal/custody/custodytest"
	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
)

// benchRequests is the stream each benchmark iteration processes: the
// generator's S1–S3 mix after goldenfield, about 21k records in batches of
// 100 requests (about 1000 records), as a batch processor sends them.
const (
	benchRequests     = 2000
	requestsPerBatch  = 100
	benchDecisionWait = 30 * time.Second
)

type benchStream struct {
	logs    []plog.Logs
	traces  []ptrace.Traces
	records int // log records and spans
	spans   int
}

var (
	benchStreamOnce sync.Once
	benchStreamData *benchStream
)

// loadBenchStream builds the stream once for every benchmark.
func loadBenchStream(b *testing.B) *benchStream {
	benchStreamOnce.Do(func() { benchStreamData = newBenchStream(b) })
	return benchStreamData
}

func newBenchStream(b *testing.B) *benchStream {
	gen, err := workload.NewGenerator(workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12, Requests: benchRequests, Seed: 1,
	})
	require.NoError(b, err)
	s := &benchStream{}
	logs, traces := new(consumertest.LogsSink), new(consumertest.TracesSink)
	chain := newGoldenChain(b, logs, traces, false)
	for i := 0; i < benchRequests; i += requestsPerBatch {
		var batch []*workload.Request
		for j := range requestsPerBatch {
			batch = append(batch, gen.Next(t0.Add(time.Duration(i+j)*10*time.Millisecond)))
		}
		td, ld := workload.ToPdata(batch)
		require.NoError(b, chain.logs.ConsumeLogs(context.Background(), ld))
		require.NoError(b, chain.traces.ConsumeTraces(context.Background(), td))
	}
	s.logs, s.traces = logs.AllLogs(), traces.AllTraces()
	for _, ld := range s.logs {
		s.records += ld.LogRecordCount()
	}
	for _, td := range s.traces {
		s.spans += td.SpanCount()
	}
	s.records += s.spans
	return s
}

// copies returns fresh copies of the stream's batches: processors keep or change what they get.
func (s *benchStream) copies(withLogs bool) ([]plog.Logs, []ptrace.Traces) {
	var logs []plog.Logs
	if withLogs {
		for _, ld := range s.logs {
			cp := plog.NewLogs()
			ld.CopyTo(cp)
			logs = append(logs, cp)
		}
	}
	traces := make([]ptrace.Traces, len(s.traces))
	for i, td := range s.traces {
		traces[i] = ptrace.NewTraces()
		td.CopyTo(traces[i])
	}
	return logs, traces
}

// pipeline is a processor under test for both signals (logs may be nil).
type pipeline struct {
	logs   consumer.Logs
	traces consumer.Traces
	parts  []component.Component
	// senders is how many goroutines send the stream, every senders-th
	// batch each, as the receivers' goroutines do; 0 means 1.
	senders int
	// acks are how long each call took to return: the sender's wait.
	acks []time.Duration
}

func (p *pipeline) feed(b *testing.B, logs []plog.Logs, traces []ptrace.Traces) {
	ctx := context.Background()
	senders := max(p.senders, 1)
	acks := make([][]time.Duration, senders)
	errs := make([]error, senders)
	var sending sync.WaitGroup
	for g := range senders {
		sending.Go(func() {
			timed := func(consume func() error) {
				start := time.Now()
				errs[g] = errors.Join(errs[g], consume())
				acks[g] = append(acks[g], time.Since(start))
			}
			for i := g; i < len(traces); i += senders {
				timed(func() error { return p.traces.ConsumeTraces(ctx, traces[i]) })
				if i < len(logs) {
					timed(func() error { return p.logs.ConsumeLogs(ctx, logs[i]) })
				}
			}
		})
	}
	sending.Wait()
	require.NoError(b, errors.Join(errs...))
	for _, a := range acks {
		p.acks = append(p.acks, a...)
	}
}

func (p *pipeline) shutdown(b *testing.B) {
	for _, c := range p.parts {
		require.NoError(b, c.Shutdown(context.Background()))
	}
}

func newReqsampling(b *testing.B, withLogs bool) *pipeline {
	return newReqsamplingOn(b, withLogs, componenttest.NewNopHost(), nil)
}

// newReqsamplingOn runs reqsampling on host, with the storage extension storage when it is set.
func newReqsamplingOn(b *testing.B, withLogs bool, host component.Host, storage *component.ID) *pipeline {
	cfg := loadConfig(b, "gateway")
	cfg.Storage = storage
	return newReqsamplingWith(b, withLogs, host, cfg)
}

func newReqsamplingWith(b *testing.B, withLogs bool, host component.Host, cfg *Config) *pipeline {
	cfg.DecisionWait = benchDecisionWait
	f := NewFactory()
	set := processortest.NewNopSettings(metadata.Type)
	p := &pipeline{}
	traces, err := f.CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(b, err)
	p.traces, p.parts = traces, append(p.parts, traces)
	if withLogs {
		logs, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
		require.NoError(b, err)
		p.logs, p.parts = logs, append(p.parts, logs)
	}
	for _, c := range p.parts {
		require.NoError(b, c.Start(context.Background(), host))
	}
	return p
}

// newTailSampling is contrib's tail_sampling with the policies closest to
// the gateway configuration's: status ERROR, the same failure conditions on
// spans, latency above 2 s, cache misses by stage, and 1% probabilistic.
func newTailSampling(b *testing.B) *pipeline {
	f := tailsamplingprocessor.NewFactory()
	cfg := f.CreateDefaultConfig()
	require.NoError(b, confmap.NewFromStringMap(map[string]any{
		"decision_wait": benchDecisionWait,
		"num_traces":    50_000,
		"policies": []any{
			map[string]any{"name": "errors", "type": "status_code", "status_code": map[string]any{"status_codes": []any{"ERROR"}}},
			map[string]any{"name": "empty_output", "type": "ottl_condition", "ottl_condition": map[string]any{
				"error_mode": "ignore",
				"span":       emptyOutputConditions,
			}},
			map[string]any{"name": "latency", "type": "latency", "latency": map[string]any{"threshold_ms": 2000}},
			map[string]any{"name": "cache_miss", "type": "string_attribute", "string_attribute": map[string]any{
				"key": "stage", "values": []any{"cache/miss.*"}, "enabled_regex_matching": true,
			}},
			map[string]any{"name": "base_rate", "type": "probabilistic", "probabilistic": map[string]any{"sampling_percentage": 1}},
		},
	}).Unmarshal(cfg))
	traces, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(f.Type()), cfg, consumertest.NewNop())
	require.NoError(b, err)
	require.NoError(b, traces.Start(context.Background(), componenttest.NewNopHost()))
	return &pipeline{traces: traces, parts: []component.Component{traces}}
}

// benchPipeline runs the whole stream through a fresh pipeline per
// iteration, from the first batch in to the last decision out (the decisions
// of both processors are made at shutdown, as decision_wait has not passed),
// and reports records/s, CPU per record, allocations per record and the
// memory each buffered record adds to what the batches themselves hold.
func benchPipeline(b *testing.B, withLogs bool, newPipeline func(*testing.B) *pipeline) {
	s := loadBenchStream(b)
	records := s.spans
	if withLogs {
		records = s.records
	}
	var mallocs uint64
	var cpu time.Duration
	var acks []time.Duration
	var ms runtime.MemStats
	for b.Loop() {
		b.StopTimer()
		logs, traces := s.copies(withLogs)
		runtime.ReadMemStats(&ms)
		before, cpuBefore := ms.Mallocs, cpuTime()
		b.StartTimer()
		p := newPipeline(b)
		p.feed(b, logs, traces)
		p.shutdown(b)
		b.StopTimer()
		acks = append(acks, p.acks...)
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		cpu += cpuTime() - cpuBefore
		b.StartTimer()
	}
	n := float64(b.N * records)
	b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(n/cpu.Seconds(), "records/cpu_s")
	b.ReportMetric(float64(mallocs)/n, "allocs/record")
	slices.Sort(acks)
	b.ReportMetric(float64(acks[len(acks)*99/100].Microseconds()), "p99_ack_µs")
	b.ReportMetric(bufferedBytes(b, s, withLogs, newPipeline)/float64(records), "B/buffered_record")
}

// bufferedBytes is how much the heap grows while a pipeline holds the whole
// stream undecided, beyond the input batches themselves.
func bufferedBytes(b *testing.B, s *benchStream, withLogs bool, newPipeline func(*testing.B) *pipeline) float64 {
	logs, traces := s.copies(withLogs)
	p := newPipeline(b)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	p.feed(b, logs, traces)
	time.Sleep(100 * time.Millisecond) // let the deciding goroutines take everything in
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := float64(ms.HeapAlloc) - float64(before)
	p.shutdown(b)
	runtime.KeepAlive(logs)
	runtime.KeepAlive(traces)
	return grown
}

// cpuTime is the CPU time this process has used, all threads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSpans compares reqsampling with contrib's tail_sampling on the
// same span stream (traces only), with comparable policies.
func BenchmarkSpans(b *testing.B) {
	b.Run("baseline-tail_sampling", func(b *testing.B) { benchPipeline(b, false, newTailSampling) })
	b.Run("reqsampling", func(b *testing.B) {
		benchPipeline(b, false, func(b *testing.B) *pipeline { return newReqsampling(b, false) })
	})
}

// BenchmarkLogsAndSpans is reqsampling on the generator's whole mix: logs
// and spans of every request, decided together.
func BenchmarkLogsAndSpans(b *testing.B) {
	benchPipeline(b, true, func(b *testing.B) *pipeline { return newReqsampling(b, true) })
}

// BenchmarkShards is reqsampling on the whole mix sent by two goroutines at
// once, on one shard and on several: run it with -cpu 1,2 to see whether
// the shards scale with the cores.
func BenchmarkShards(b *testing.B) {
	for _, shards := range []int{1, 2, 4} {
		name := fmt.Sprintf("%dshards", shards)
		if shards == 1 {
			name = "baseline-1shard"
		}
		b.Run(name, func(b *testing.B) {
			benchPipeline(b, true, func(b *testing.B) *pipeline {
				cfg := loadConfig(b, "gateway")
				cfg.NumShards = shards
				p := newReqsamplingWith(b, true, componenttest.NewNopHost(), cfg)
				p.senders = 2
				return p
			})
		})
	}
}

// BenchmarkStorage is the cost of keeping waiting records across a crash:
// reqsampling on the whole mix with its batches in memory only, and written
// to a real file_storage before each call returns (p99_ack_µs: the added wait
// of the sender).
func BenchmarkStorage(b *testing.B) {
	b.Run("baseline-memory", func(b *testing.B) {
		benchPipeline(b, true, func(b *testing.B) *pipeline { return newReqsampling(b, true) })
	})
	b.Run("file_storage", func(b *testing.B) {
		benchPipeline(b, true, func(b *testing.B) *pipeline {
			return newReqsamplingOn(b, true, custodytest.FileStorage(b, b.TempDir()), &custodytest.ID)
		})
	})
}
