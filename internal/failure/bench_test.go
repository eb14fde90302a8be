package failure

import (
	"runtime"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// benchRecords are log records of 8 places with 10 attributes each: words,
// flags, counts, durations and identifiers, as a service's records carry.
func benchRecords(n int) []*Record {
	out := make([]*Record, n)
	for i := range out {
		i := i
		out[i] = logRecord(func(lr plog.LogRecord) {
			m := lr.Attributes()
			m.PutStr("req_id", "req-1715234890000-"+strconv.Itoa(100000+i))
			m.PutStr("outcome", []string{"ok", "ok", "ok", "retry"}[i%4])
			m.PutBool("cached", i%3 == 0)
			m.PutInt("tokens", int64(40+i%400))
			m.PutDouble("resource_usage.latency_ms", float64(5+i%50))
			m.PutStr("worker", "w-"+strconv.Itoa(i%64))
			m.PutStr("tier", []string{"gold", "silver", "bronze"}[i%3])
			m.PutInt("retries", int64(i%7/6))
			m.PutStr("region", "eu")
			m.PutStr("finish", []string{"stop", "length"}[i%5/4])
		})
		out[i].Service, out[i].Stage = "svc", "stage/"+strconv.Itoa(i%8)
	}
	return out
}

// BenchmarkDriftCheck is the value-drift detector's cost per record, learning included.
func BenchmarkDriftCheck(b *testing.B) {
	d := defaultDrift(func() {})
	recs := benchRecords(4096)
	notes := make([]Candidate, 0, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		notes = d.Check(recs[i%len(recs)], notes[:0], 64)
		i++
	}
}

// BenchmarkLatencyCheck is the latency detector's cost per record.
func BenchmarkLatencyCheck(b *testing.B) {
	l := newTestLatency(func() {})
	recs := benchRecords(4096)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Check(recs[i%len(recs)], t0)
		i++
	}
}

// BenchmarkTextSeverity is the cost of reading a severity from a body.
func BenchmarkTextSeverity(b *testing.B) {
	lines := []string{"2024-05-01 12:00:00,123 - kilnserve.engine - ERROR - decode step failed for req-1",
		`{"event":"request aborted","level":"error","llm.request_id":"req-1"}`, "ts=1 lvl=info msg=done",
		"request completed in 12 ms"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		TextSeverity(lines[i%len(lines)])
		i++
	}
}

// learnedHeap returns a detector fed by feed and the heap it holds after.
func learnedHeap(minBaseline float64, maxPlaces int, feed func(d *Drift)) (*Drift, float64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := NewDrift(DriftConfig{RareShare: 0.05, SurgeRatio: 4, MinCount: 4, BaselineRecords: 20000, RecentRecords: 400,
		MinBaseline: minBaseline, MaxPlaces: maxPlaces, MaxAttributes: 64, MaxValues: 24}, func() {})
	feed(d)
	runtime.GC()
	runtime.ReadMemStats(&after)
	return d, float64(after.HeapAlloc - before.HeapAlloc)
}

// TestDriftMemoryAt10kKeys measures the learned state of 10,000 (service,
// stage, attribute) keys: 200 places of 50 outcome attributes with 4 values each.
func TestDriftMemoryAt10kKeys(t *testing.T) {
	d, heap := learnedHeap(100, 2000, func(d *Drift) {
		attrs := pcommon.NewMap()
		for p := range 200 {
			for rep := range 4 {
				attrs.Clear()
				for a := range 50 {
					attrs.PutStr("attr."+strconv.Itoa(a), []string{"a", "b", "c", "d"}[rep])
				}
				d.Check(&Record{Attrs: attrs, Service: "svc-" + strconv.Itoa(p%20), Stage: "stage/" + strconv.Itoa(p)}, nil, 0)
			}
		}
	})
	perKey := heap / 10000
	t.Logf("value drift: %d places, 10000 keys, %.0f bytes per key (%.1f MiB)", d.places.len(), perKey, perKey*10000/(1<<20))
	if d.places.len() != 200 {
		t.Fatalf("%d places", d.places.len())
	}
	if perKey > 2048 {
		t.Errorf("%.0f bytes per key; the README says under 2 KiB", perKey)
	}
	runtime.KeepAlive(d)
}

// TestDriftMemoryAt10kPlaces measures the learned state of 10,000 places
// (services and stages), each with two kinds of line of five attributes:
// words, a flag, a count, a score and an identifier.
func TestDriftMemoryAt10kPlaces(t *testing.T) {
	d, heap := learnedHeap(48, 20000, func(d *Drift) {
		attrs := pcommon.NewMap()
		for p := range 10000 {
			for rep := range 64 {
				attrs.Clear()
				attrs.PutStr("outcome", []string{"ok", "retry", "skip"}[rep%3])
				if rep%2 == 0 {
					attrs.PutBool("cached", rep%5 == 0)
					attrs.PutInt("items", int64(rep%9))
				} else {
					attrs.PutDouble("score", float64(rep%10)/10)
					attrs.PutStr("worker", "w-"+strconv.Itoa(rep))
				}
				d.Check(&Record{Attrs: attrs, Service: "svc-" + strconv.Itoa(p%50), Stage: "stage/" + strconv.Itoa(p)}, nil, 0)
			}
		}
	})
	perPlace := heap / 10000
	t.Logf("value drift: %d places, %.0f bytes per place (%.1f MiB)", d.places.len(), perPlace, perPlace*10000/(1<<20))
	if d.places.len() != 10000 {
		t.Fatalf("%d places", d.places.len())
	}
	if perPlace > 8192 {
		t.Errorf("%.0f bytes per place; expected about 3.3 KiB (internal/failure/README.md)", perPlace)
	}
	runtime.KeepAlive(d)
}
