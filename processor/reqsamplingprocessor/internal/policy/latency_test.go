package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var t0 = time.Unix(1715234890, 0)

func TestLatencyThreshold(t *testing.T) {
	p := NewLatency(LatencyConfig{Threshold: 2 * time.Second, MaxSeries: 10}, func() {})
	assert.True(t, p.MatchRequest(&Request{Duration: 2001 * time.Millisecond}, false))
	assert.False(t, p.MatchRequest(&Request{Duration: 2 * time.Second}, false))
	assert.False(t, p.MatchRequest(&Request{}, false), "no span, no duration")
	assert.False(t, p.MatchRecord(&Record{}))
}

func TestLatencyLiveQuantilePerSeries(t *testing.T) {
	evicted := 0
	p := NewLatency(LatencyConfig{Quantile: 0.99, MinSamples: 100, HalfLife: time.Hour, MaxSeries: 2}, func() { evicted++ })
	observe := func(entry string, d time.Duration) {
		p.Observe(&Request{Entry: entry, Duration: d, Now: t0})
	}
	slow := &Request{Entry: "gateway/gateway/request", Duration: 1500 * time.Millisecond, Now: t0}
	for i := range 99 {
		observe("gateway/gateway/request", time.Duration(100+i)*time.Millisecond)
	}
	assert.False(t, p.MatchRequest(slow, false), "99 samples: below min_samples")
	observe("gateway/gateway/request", 199*time.Millisecond)
	assert.True(t, p.MatchRequest(slow, false), "above p99 of 100–199 ms")
	assert.False(t, p.MatchRequest(&Request{Entry: "gateway/gateway/request", Duration: 150 * time.Millisecond}, false))

	// Each series has its own quantile: 1.5 s is ordinary for a batch task.
	for range 200 {
		observe("celery-worker/celery/task", 2*time.Second)
	}
	slow.Entry = "celery-worker/celery/task"
	assert.False(t, p.MatchRequest(slow, false))

	observe("third/series", time.Second)
	assert.Equal(t, 1, evicted, "max_series 2: the least recently seen series is evicted")
	slow.Entry = "gateway/gateway/request"
	assert.False(t, p.MatchRequest(slow, false), "an evicted series starts over")
}

func TestLatencyQuantileFollowsTheTraffic(t *testing.T) {
	p := NewLatency(LatencyConfig{Quantile: 0.9, MinSamples: 10, HalfLife: time.Minute, MaxSeries: 1}, func() {})
	for range 1000 {
		p.Observe(&Request{Entry: "e", Duration: 100 * time.Millisecond, Now: t0})
	}
	req := &Request{Entry: "e", Duration: 300 * time.Millisecond}
	assert.True(t, p.MatchRequest(req, false))
	later := t0.Add(time.Hour)
	for range 1000 {
		p.Observe(&Request{Entry: "e", Duration: 500 * time.Millisecond, Now: later})
	}
	assert.False(t, p.MatchRequest(req, false), "the old fast requests are forgotten")
}
