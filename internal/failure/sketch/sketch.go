// Package sketch estimates quantiles of a stream of positive values (request
// durations in milliseconds) within a bounded relative error and a fixed
// memory, forgetting old values with a half-life so the estimate follows
// the live traffic.
package sketch // import "github.com/loom-otel/loom/internal/failure/sketch"

import (
	"math"
	"time"
)

const (
	// RelativeError sets the bucket width: bucket bounds grow by a factor
	// (1+RelativeError)/(1-RelativeError), about 4%.
	RelativeError = 0.02
	// MinValue and MaxValue bound the values told apart; smaller and larger
	// values are counted with them.
	MinValue = 1e-3 // 1 µs in ms
	MaxValue = 1e8  // about 28 hours in ms

	// decaySteps is how many times per half-life old counts are scaled down.
	decaySteps = 16
)

var (
	gamma    = (1 + RelativeError) / (1 - RelativeError)
	logGamma = math.Log(gamma)
	buckets  = int(math.Ceil(math.Log(MaxValue/MinValue)/logGamma)) + 1
)

// Sketch is a logarithmic histogram: bucket i counts the values in
// (MinValue·γ^(i-1), MinValue·γ^i]. Its size is fixed (about 5 KiB).
type Sketch struct {
	counts    []float64
	total     float64
	halfLife  time.Duration
	decayedAt time.Time
}

// New returns an empty sketch whose counts halve every halfLife (0: never).
func New(halfLife time.Duration) *Sketch {
	return &Sketch{counts: make([]float64, buckets), halfLife: halfLife}
}

// Add counts v, observed at now.
func (s *Sketch) Add(v float64, now time.Time) {
	s.decay(now)
	s.counts[index(v)]++
	s.total++
}

// Count is the number of values counted, decayed.
func (s *Sketch) Count() float64 { return s.total }

// Quantile returns an upper bound of the q-quantile (0 ≤ q ≤ 1): the top of
// the bucket that holds it, never below it and at most one bucket width
// (about 4%) above it, for values between MinValue and MaxValue; 0 when
// empty. A value above it is slower than every value in that bucket.
func (s *Sketch) Quantile(q float64) float64 {
	if s.total == 0 {
		return 0
	}
	rank := q * s.total
	var seen float64
	for i, c := range s.counts {
		seen += c
		if seen >= rank && c > 0 {
			return upper(i)
		}
	}
	return upper(buckets - 1)
}

func (s *Sketch) decay(now time.Time) {
	if s.decayedAt.IsZero() {
		s.decayedAt = now
		return
	}
	elapsed := now.Sub(s.decayedAt)
	if s.halfLife <= 0 || elapsed < s.halfLife/decaySteps {
		return
	}
	f := math.Exp2(-float64(elapsed) / float64(s.halfLife))
	for i := range s.counts {
		s.counts[i] *= f
	}
	s.total *= f
	s.decayedAt = now
}

func index(v float64) int {
	if !(v > MinValue) { // NaN included
		return 0
	}
	if v >= MaxValue {
		return buckets - 1
	}
	return min(int(math.Ceil(math.Log(v/MinValue)/logGamma)), buckets-1)
}

// upper is the top of bucket i.
func upper(i int) float64 { return MinValue * math.Pow(gamma, float64(i)) }
