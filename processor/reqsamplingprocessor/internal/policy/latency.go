package policy

import (
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/sketch"
)

// LatencyConfig configures the latency policy.
type LatencyConfig struct {
	// Threshold keeps every request slower than it (0: off).
	Threshold time.Duration
	// Quantile keeps every request slower than this live quantile of the
	// recent requests of its series (0: off).
	Quantile float64
	// MinSamples is how many recent requests a series needs before its
	// quantile is trusted.
	MinSamples float64
	// HalfLife is how fast a series forgets old requests.
	HalfLife time.Duration
	// MaxSeries bounds the series tracked; the least recently seen is evicted.
	MaxSeries int
}

// Latency matches requests slower than a fixed threshold or than a live
// quantile of their series (service.name and stage of the entry span),
// tracked with a streaming sketch. A request without an entry span is held
// to the threshold only.
type Latency struct {
	requestPolicy
	cfg    LatencyConfig
	series *simplelru.LRU[string, *series]
}

var (
	_ Evaluator = (*Latency)(nil)
	_ Observer  = (*Latency)(nil)
)

// series is one entry point's recent durations and its cached cutoff.
type series struct {
	sketch *sketch.Sketch
	cutoff float64 // ms; refreshed every refreshEvery observations
	stale  int
}

// refreshEvery bounds how often a series' quantile is recomputed: a walk
// over the sketch's buckets, amortized over this many requests.
const refreshEvery = 32

// NewLatency returns the latency policy; evicted is called for every series
// evicted to stay within MaxSeries.
func NewLatency(cfg LatencyConfig, evicted func()) *Latency {
	lru, _ := simplelru.NewLRU(max(cfg.MaxSeries, 1), func(string, *series) { evicted() })
	return &Latency{cfg: cfg, series: lru}
}

func (l *Latency) MatchRequest(req *Request, _ bool) bool {
	if req.Duration <= 0 {
		return false
	}
	if l.cfg.Threshold > 0 && req.Duration > l.cfg.Threshold {
		return true
	}
	if l.cfg.Quantile == 0 || req.Entry == "" {
		return false
	}
	s, ok := l.series.Peek(req.Entry)
	if !ok || s.sketch.Count() < l.cfg.MinSamples {
		return false
	}
	if s.stale >= refreshEvery || s.cutoff == 0 {
		s.cutoff, s.stale = s.sketch.Quantile(l.cfg.Quantile), 0
	}
	return millis(req.Duration) > s.cutoff
}

func (l *Latency) Observe(req *Request) {
	if l.cfg.Quantile == 0 || req.Entry == "" || req.Duration <= 0 {
		return
	}
	s, ok := l.series.Get(req.Entry)
	if !ok {
		s = &series{sketch: sketch.New(l.cfg.HalfLife)}
		// The key outlives the request's records.
		l.series.Add(strings.Clone(req.Entry), s)
	}
	s.sketch.Add(millis(req.Duration), req.Now)
	s.stale++
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
