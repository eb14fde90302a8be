package failure

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

var t0 = time.Unix(1715234890, 0)

func stageSpan(service, stage string, d time.Duration) *Record {
	r := span(func(s ptrace.Span) {
		s.SetName("op")
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(d)))
	})
	r.Service, r.Stage = service, stage
	return r
}

func newTestLatency(evicted func()) *Latency {
	return NewLatency(LatencyConfig{Quantile: 0.99, Factor: 2, MinExcess: 5 * time.Millisecond, MinSamples: 100,
		HalfLife: time.Hour, MaxPlaces: 32}, evicted)
}

func TestLatencyPerPlace(t *testing.T) {
	l := newTestLatency(func() {})
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	for i := range 300 {
		_, slow := l.Check(stageSpan("tok", "encode", ms(4+float64(i%30)/10)), t0)
		assert.False(t, slow)
		_, slow = l.Check(stageSpan("engine", "decode", ms(200+float64(i%800))), t0)
		assert.False(t, slow)
	}
	r, slow := l.Check(stageSpan("tok", "encode", 300*time.Millisecond), t0)
	assert.True(t, slow, "300 ms is abnormal for a 4–7 ms stage")
	assert.Equal(t, KindLatency, r.Kind)
	assert.Equal(t, "tok", r.Service)
	assert.InDelta(t, 300, r.Current, 0.01)
	_, slow = l.Check(stageSpan("engine", "decode", 300*time.Millisecond), t0)
	assert.False(t, slow, "and ordinary for decode")
	_, slow = l.Check(stageSpan("tok", "encode", 12*time.Millisecond), t0)
	assert.False(t, slow, "under the 5 ms minimum excess over the p99")
}

func TestLatencySlowMinorityStaysAbnormal(t *testing.T) {
	l := newTestLatency(func() {})
	for range 300 {
		l.Check(stageSpan("tok", "encode", 5*time.Millisecond), t0)
	}
	// One replica of three turns slow: a third of the place, for long.
	slowSeen := 0
	for i := range 3000 {
		d := 5 * time.Millisecond
		if i%3 == 0 {
			d = 300 * time.Millisecond
		}
		if _, slow := l.Check(stageSpan("tok", "encode", d), t0); slow {
			slowSeen++
		}
	}
	assert.Equal(t, 1000, slowSeen, "every slow record stays abnormal")

	// Everything turns slow: a new normal, learned.
	for range 2000 {
		l.Check(stageSpan("tok", "encode", 300*time.Millisecond), t0)
	}
	_, slow := l.Check(stageSpan("tok", "encode", 310*time.Millisecond), t0)
	assert.False(t, slow, "a change that takes over the place becomes its normal")
}

func TestLatencyFromLogsAndModels(t *testing.T) {
	l := newTestLatency(func() {})
	logged := func(model string, ms float64) *Record {
		r := logRecord(func(lr plog.LogRecord) { lr.Attributes().PutDouble(golden.LatencyMs, ms) })
		r.Service, r.Stage, r.Model = "engine", "generate", model
		return r
	}
	for range 200 {
		l.Check(logged("small-v1", 100), t0)
		l.Check(logged("large-v3", 2000), t0)
	}
	_, slow := l.Check(logged("small-v1", 1000), t0)
	assert.True(t, slow, "slow for the small model")
	_, slow = l.Check(logged("large-v3", 2100), t0)
	assert.False(t, slow, "each model has its own place")
	_, slow = l.Check(logRecord(func(plog.LogRecord) {}), t0)
	assert.False(t, slow, "a record without a duration")
}

func TestLatencyPlacesAreBounded(t *testing.T) {
	evicted := 0
	l := NewLatency(LatencyConfig{Quantile: 0.99, Factor: 2, MinSamples: 1, HalfLife: time.Hour, MaxPlaces: 16}, func() { evicted++ })
	for i := range 100 {
		l.Check(stageSpan("svc", string(rune('a'+i%26))+string(rune('a'+i/26)), time.Millisecond), t0)
	}
	assert.LessOrEqual(t, l.places.len(), 16)
	assert.Equal(t, 100-l.places.len(), evicted)
}
