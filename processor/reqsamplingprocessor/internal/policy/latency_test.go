package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/failure"
)

var t0 = time.Unix(1715234890, 0)

func TestLatencyThreshold(t *testing.T) {
	p := NewLatency("latency", failure.NewLatency(failure.LatencyConfig{Threshold: 2 * time.Second, MaxPlaces: 16}, func() {}),
		func() time.Time { return t0 })
	f := &Findings{}
	assert.True(t, p.MatchRequest(&Request{Entry: "edge/edge/request", Duration: 2001 * time.Millisecond, Findings: f}, false))
	assert.Equal(t, "edge", f.Verdict.Reasons[0].Service)
	assert.Equal(t, "edge/request", f.Verdict.Reasons[0].Stage)
	assert.False(t, p.MatchRequest(&Request{Duration: 2 * time.Second, Findings: &Findings{}}, false))
	assert.False(t, p.MatchRequest(&Request{Findings: &Findings{}}, false), "no span, no duration")
	assert.True(t, p.MatchRequest(&Request{Findings: &Findings{}}, true), "a slow record matched")
}

func TestLatencyDetectsAbnormalStages(t *testing.T) {
	p := NewLatency("latency", failure.NewLatency(failure.LatencyConfig{Quantile: 0.99, Factor: 2, MinSamples: 100,
		HalfLife: time.Hour, MaxPlaces: 16}, func() {}), func() time.Time { return t0 })
	stage := func(ms int) *Record {
		r := span(func(s ptrace.Span) {
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(ms) * time.Millisecond)))
		})
		r.Service, r.Stage = "tok", "tok/encode"
		return r
	}
	for i := range 200 {
		assert.False(t, p.MatchRecord(stage(5+i%5)))
	}
	f := &Findings{}
	assert.True(t, p.DetectRecord(stage(300), f))
	assert.Equal(t, failure.KindLatency, f.Verdict.Reasons[0].Kind)
	assert.Equal(t, "latency", f.Verdict.Reasons[0].Detector)
}

// A stage slow inside a span that mostly waits on its callee: the span's
// duration stays usual, its own time does not.
func TestLatencyJudgesASpansOwnTime(t *testing.T) {
	p := NewLatency("latency", failure.NewLatency(failure.LatencyConfig{Quantile: 0.99, Factor: 2, MinSamples: 100,
		HalfLife: time.Hour, MaxPlaces: 64}, func() {}), func() time.Time { return t0 })
	at := func(ms int) pcommon.Timestamp {
		return pcommon.NewTimestampFromTime(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	request := func(own int) *Request {
		// The router spends own ms, then waits for the ranker; 1000 ms in all.
		return &Request{Now: t0, Findings: &Findings{}, Spans: []failure.SpanTiming{
			// No stage attribute: its place is named by its span name, its
			// reason by its stage as the records carry it (none), as a
			// duration's is, so that the graph marks the span's event.
			{Span: pcommon.SpanID{1}, Start: at(0), End: at(1000), Service: "router", Name: "GET /route"},
			{Span: pcommon.SpanID{2}, Parent: pcommon.SpanID{1}, Start: at(own), End: at(1000), Service: "ranker", Stage: "rank"},
		}}
	}
	for i := range 200 {
		assert.False(t, p.MatchRequest(request(20+i%5), false))
	}
	slow := request(300)
	assert.True(t, p.MatchRequest(slow, false))
	reason := slow.Findings.Verdict.Reasons[0]
	assert.Equal(t, failure.SelfTimeAttr, reason.Attribute)
	assert.Empty(t, reason.Stage)
	assert.Equal(t, "router", reason.Service)
	assert.Equal(t, 300.0, reason.Current)
	assert.False(t, p.MatchRequest(&Request{Now: t0, Findings: &Findings{}}, false), "no spans timed")
}
