package sketch

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestQuantileIsATightUpperBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := New(0)
	now := time.Unix(0, 0)
	var values []float64
	for range 20000 {
		v := math.Exp(rng.NormFloat64()*1.5 + 5) // log-normal around 150 ms
		values = append(values, v)
		s.Add(v, now)
	}
	slices.Sort(values)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := values[int(math.Ceil(q*float64(len(values))))-1]
		if got := s.Quantile(q); got < want || got > want*gamma {
			t.Errorf("q%v = %v, want %v to %v", q, got, want, want*gamma)
		}
	}
}

func TestDecayFollowsTheLiveTraffic(t *testing.T) {
	s := New(time.Minute)
	now := time.Unix(0, 0)
	for range 1000 {
		s.Add(100, now)
	}
	// Ten half-lives later the old values weigh about 1/1024 each.
	now = now.Add(10 * time.Minute)
	for range 1000 {
		s.Add(5000, now)
	}
	if got := s.Quantile(0.5); got < 5000 || got > 5000*gamma {
		t.Errorf("median after the shift = %v, want about 5000", got)
	}
	if got := s.Count(); got < 1000 || got > 1002 {
		t.Errorf("Count = %v, want about 1001", got)
	}
}

func TestExtremeValues(t *testing.T) {
	s := New(time.Minute)
	now := time.Unix(0, 0)
	if s.Quantile(0.99) != 0 {
		t.Error("empty sketch has a quantile")
	}
	for _, v := range []float64{0, -5, math.NaN(), math.Inf(1), 1e300, 1e-300} {
		s.Add(v, now)
	}
	if s.Count() != 6 {
		t.Errorf("Count = %v", s.Count())
	}
	if got := s.Quantile(1); got < MaxValue {
		t.Errorf("max = %v, want about %v", got, MaxValue)
	}
	if got := s.Quantile(0); got > MinValue*gamma {
		t.Errorf("min = %v, want at most %v", got, MinValue)
	}
}
