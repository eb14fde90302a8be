package workload

import (
	"context"
	"runtime"
	"testing"
	"time"
)

var benchConfig = Config{Scenarios: []Scenario{S1, S2, S3}, Affected: 0.12, Seed: 1}

// BenchmarkGenerate measures the pure request model; allocs/record is the
// allocation count per span or log record modelled.
func BenchmarkGenerate(b *testing.B) {
	cfg := benchConfig
	cfg.Requests = b.N
	g, err := NewGenerator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	records := 0
	mallocs := mallocCount()
	b.ResetTimer()
	for range b.N {
		records += g.Next(now).Records()
	}
	b.StopTimer()
	report(b, records, mallocCount()-mallocs, b.Elapsed())
}

func mallocCount() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func report(b *testing.B, records int, mallocs uint64, elapsed time.Duration) {
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(records)/float64(b.N), "records/req")
	b.ReportMetric(float64(mallocs)/float64(records), "allocs/record")
}

// BenchmarkRun measures Run end to end: model, SDK, OTLP export and an
// in-process receiver decoding every payload. Run it with GOMAXPROCS=1 to
// see what one core sustains (receiver included).
func BenchmarkRun(b *testing.B) {
	for _, proto := range []Protocol{GRPC, HTTP} {
		b.Run(string(proto), func(b *testing.B) {
			s := startSink(b, false)
			endpoint := s.GRPCEndpoint
			if proto == HTTP {
				endpoint = s.HTTPEndpoint
			}
			cfg := benchConfig
			cfg.Requests = b.N
			mallocs := mallocCount()
			b.ResetTimer()
			sum, err := Run(context.Background(), cfg, Target{Endpoint: endpoint, Protocol: proto, Insecure: true}, nil)
			b.StopTimer()
			mallocs = mallocCount() - mallocs
			if err != nil {
				b.Fatal(err)
			}
			if spans, logs := sinkCounts(s); spans != sum.Spans || logs != sum.Logs {
				b.Fatalf("sink received %d spans, %d logs; sent %d, %d", spans, logs, sum.Spans, sum.Logs)
			}
			// Run's own clock covers the final flush; allocations include the receiver's.
			report(b, sum.Spans+sum.Logs, mallocs, sum.Elapsed)
		})
	}
}
