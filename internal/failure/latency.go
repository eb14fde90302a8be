package failure

import (
	"cmp"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/failure/sketch"
	"github.com/loom-otel/loom/internal/golden"
)

// LatencyConfig configures the latency detector.
type LatencyConfig struct {
	// Threshold marks every request whose entry span is slower (0: off): an SLO.
	Threshold time.Duration
	// Quantile is the live quantile of a place's durations that bounds its
	// usual time, e.g. 0.99.
	Quantile float64
	// Factor: a record is abnormally slow above Factor × that quantile, e.g. 2.
	Factor float64
	// MinExcess: nor is a record abnormal unless it exceeds the quantile by at
	// least this much (sub-millisecond stages jitter by multiples).
	MinExcess time.Duration
	// MinSamples is how many recent records a place needs before it is judged.
	MinSamples float64
	// HalfLife is how fast a place forgets old durations.
	HalfLife time.Duration
	// MaxPlaces bounds the places tracked; the least recently seen is evicted.
	MaxPlaces int
}

// Latency learns, online and per place (service, stage and model of a span,
// or of a log record that states its resource_usage.latency_ms), how long the
// place usually takes, and finds the records far beyond it. Abnormal
// durations are kept out of the place's baseline, so that a slow minority
// (one replica of three) stays abnormal, unless they become the majority of
// its recent records: then they are its new normal.
type Latency struct {
	cfg    LatencyConfig
	places *shardedLRU[*latencyPlace]
}

type latencyPlace struct {
	sketch *sketch.Sketch
	cutoff float64 // ms, refreshed every refreshEvery observations
	stale  int
	// abnormal is the decayed share of the recent records found abnormal.
	abnormal float64
}

const (
	refreshEvery = 32
	// abnormalMemory is the number of records the abnormal share averages over.
	abnormalMemory = 128
)

// NewLatency returns the detector; evicted is called for every place evicted.
func NewLatency(cfg LatencyConfig, evicted func()) *Latency {
	return &Latency{cfg: cfg, places: newShardedLRU[*latencyPlace](cfg.MaxPlaces, evicted)}
}

// The attributes a latency reason names: a span's (or a line's) duration,
// or a span's own time (SelfTimes).
const (
	DurationAttr = "duration_ms"
	SelfTimeAttr = "self_time_ms"
)

// Check learns r's duration and says whether it is abnormal for its place.
func (l *Latency) Check(r *Record, now time.Time) (Reason, bool) {
	if l.cfg.Quantile == 0 {
		return Reason{}, false
	}
	ms, key, ok := duration(r)
	if !ok {
		return Reason{}, false
	}
	bound, abnormal := l.judge(key, ms, now)
	if !abnormal {
		return Reason{}, false
	}
	return Reason{Kind: KindLatency, Service: r.Service, Stage: r.Stage, Attribute: DurationAttr, Baseline: bound, Current: ms}, true
}

// CheckSelf learns the own time (ms, SelfTimes) of span s and says whether it
// is abnormal for its place: a stage that grew slow inside a span that
// mostly waits on its callees barely moves the span's duration.
func (l *Latency) CheckSelf(s *SpanTiming, ms float64, now time.Time) (Reason, bool) {
	if l.cfg.Quantile == 0 {
		return Reason{}, false
	}
	bound, abnormal := l.judge(placeKey{service: s.Service, stage: cmp.Or(s.Stage, s.Name), model: s.Model, span: true, self: true}, ms, now)
	if !abnormal {
		return Reason{}, false
	}
	return Reason{Kind: KindLatency, Service: s.Service, Stage: s.Stage, Attribute: SelfTimeAttr, Baseline: bound, Current: ms}, true
}

// judge learns ms at place key, and says whether it is abnormal there and
// the bound it broke.
func (l *Latency) judge(key placeKey, ms float64, now time.Time) (bound float64, abnormal bool) {
	sh, p := l.places.acquire(key, l.newPlace)
	defer sh.mu.Unlock()
	if p.sketch.Count() >= l.cfg.MinSamples {
		if p.stale >= refreshEvery || p.cutoff == 0 {
			p.cutoff, p.stale = p.sketch.Quantile(l.cfg.Quantile), 0
		}
		bound = p.cutoff * l.cfg.Factor
		abnormal = ms > bound && ms-p.cutoff > millis(l.cfg.MinExcess)
	}
	p.abnormal += (b2f(abnormal) - p.abnormal) / abnormalMemory
	if !abnormal || p.abnormal > 0.5 {
		p.sketch.Add(ms, now)
		p.stale++
	}
	return bound, abnormal
}

func (l *Latency) newPlace(placeKey) *latencyPlace {
	return &latencyPlace{sketch: sketch.New(l.cfg.HalfLife)}
}

// SlowRequest says whether a request whose entry span took d breaks the threshold.
func (l *Latency) SlowRequest(d time.Duration, service, stage string) (Reason, bool) {
	if l.cfg.Threshold <= 0 || d <= l.cfg.Threshold {
		return Reason{}, false
	}
	return Reason{Kind: KindLatency, Service: service, Stage: stage, Attribute: "duration_ms",
		Baseline: millis(l.cfg.Threshold), Current: millis(d)}, true
}

// duration is a span's duration, or the latency a log record states, with its place.
func duration(r *Record) (ms float64, key placeKey, ok bool) {
	key = placeKey{service: r.Service, stage: r.Stage, model: r.Model, span: r.IsSpan}
	if r.IsSpan {
		start, end := r.Span.StartTimestamp(), r.Span.EndTimestamp()
		if start == 0 || end <= start {
			return 0, key, false
		}
		if key.stage == "" {
			key.stage = r.Span.Name()
		}
		return float64(end-start) / 1e6, key, true
	}
	if key.stage == "" {
		return 0, key, false
	}
	v, found := r.Attrs.Get(golden.LatencyMs)
	switch {
	case !found:
		return 0, key, false
	case v.Type() == pcommon.ValueTypeDouble:
		ms = v.Double()
	case v.Type() == pcommon.ValueTypeInt:
		ms = float64(v.Int())
	default:
		return 0, key, false
	}
	return ms, key, ms > 0
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
