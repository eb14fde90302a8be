package failure

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func timing(id, parent byte, startMs, endMs int) SpanTiming {
	at := func(ms int) pcommon.Timestamp { return pcommon.Timestamp(1_000_000_000 + int64(ms)*1_000_000) }
	s := SpanTiming{Span: pcommon.SpanID{id}, Start: at(startMs), End: at(endMs), Service: "svc", Stage: "stage"}
	if parent != 0 {
		s.Parent = pcommon.SpanID{parent}
	}
	return s
}

func TestSelfTimes(t *testing.T) {
	got := SelfTimes([]SpanTiming{
		timing(1, 0, 0, 100),   // root: children cover 10..40 and 30..70 (union 60) and 95..120 (clipped: 5)
		timing(2, 1, 10, 40),   // has a child covering all of it
		timing(3, 1, 30, 70),   // parallel to 2
		timing(4, 1, 95, 120),  // clock skew: ends after its parent
		timing(5, 2, 5, 45),    // wider than its parent
		timing(6, 9, 0, 10),    // its parent is not among them
		timing(7, 7, 0, 10),    // names itself
		timing(8, 0, 200, 200), // no duration
	})
	assert.Equal(t, []float64{35, 0, -1, -1, -1, -1, -1, -1}, got)
}

func TestCheckSelf(t *testing.T) {
	l := NewLatency(LatencyConfig{Quantile: 0.99, Factor: 2, MinExcess: time.Millisecond, MinSamples: 50, HalfLife: time.Hour, MaxPlaces: 1000}, func() {})
	now := time.Unix(1_800_000_000, 0)
	s := timing(1, 0, 0, 1000)
	for i := range 200 {
		_, slow := l.CheckSelf(&s, 5+float64(i%3), now)
		assert.False(t, slow)
	}
	reason, slow := l.CheckSelf(&s, 80, now)
	assert.True(t, slow)
	assert.Equal(t, SelfTimeAttr, reason.Attribute)
	reason.Detector = "latency"
	assert.Equal(t, "latency: self_time_ms at stage (svc): 80.0 ms, usually under 14.4 ms", reason.String())
	// The span's duration is judged apart: its place knows nothing yet.
	_, slow = l.Check(&Record{Service: "svc", Stage: "stage", IsSpan: true, Span: spanOf(s)}, now)
	assert.False(t, slow)
}

func spanOf(s SpanTiming) ptrace.Span {
	span := ptrace.NewSpan()
	span.SetSpanID(s.Span)
	span.SetStartTimestamp(s.Start)
	span.SetEndTimestamp(s.End)
	return span
}
