package foundry

import (
	"runtime"
	"testing"
	"time"

	"github.com/loom-otel/loom/internal/workload"
)

// BenchmarkGenerate measures the pure request model with every incident on
// a fifth of the traffic; allocs/record is per span or log record modelled.
func BenchmarkGenerate(b *testing.B) {
	g, err := NewGenerator(Config{Incidents: Incidents(), Affected: 0.2, Warmup: 1, Seed: 1, Pace: workload.Pace{Requests: b.N}})
	if err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	now, records := time.Now(), 0
	b.ResetTimer()
	for range b.N {
		records += g.Next(now).Records()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(records)/float64(b.N), "records/req")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(records), "allocs/record")
}
