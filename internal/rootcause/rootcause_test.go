package rootcause

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// grid is a small complete lattice: dimension a with na values, b with nb,
// c with nc; each leaf's predict is drawn around 100, its real within
// relative noise of it, and the leaves matching a cause scaled by factor.
type grid struct {
	na, nb, nc int
	noise      float64
	causes     map[string]float64 // element ("a=a2&c=c1") -> factor on real
}

func (g grid) leaves(seed uint64) []Leaf {
	rng := rand.New(rand.NewPCG(seed, 99))
	var out []Leaf
	for a := range g.na {
		for b := range g.nb {
			for c := range g.nc {
				terms := []Term{{"a", fmt.Sprint("a", a+1)}, {"b", fmt.Sprint("b", b+1)}, {"c", fmt.Sprint("c", c+1)}}
				predict := 50 + 100*rng.Float64()
				real := predict * (1 + g.noise*rng.NormFloat64())
				for el, factor := range g.causes {
					if matchesElement(terms, el) {
						real = predict * factor
					}
				}
				out = append(out, Leaf{Terms: terms, Real: real, Predict: predict})
			}
		}
	}
	return out
}

func matchesElement(terms []Term, el string) bool {
	for _, want := range strings.Split(el, "&") {
		if !slices.ContainsFunc(terms, func(t Term) bool { return t.Dim+"="+t.Value == want }) {
			return false
		}
	}
	return true
}

func localizeSet(t *testing.T, leaves []Leaf) string {
	t.Helper()
	cands, err := Localize(leaves, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var set []string
	for _, c := range cands {
		set = append(set, c.Element.String())
	}
	slices.Sort(set)
	return strings.Join(set, ";")
}

func TestLocalizeHandMadeCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		g      grid
		expect string
	}{
		{"no anomaly", grid{na: 6, nb: 5, nc: 4, noise: 0.05}, ""},
		{"layer 1", grid{na: 6, nb: 5, nc: 4, noise: 0.05, causes: map[string]float64{"a=a2": 0.5}}, "a=a2"},
		{"layer 3 (one leaf)", grid{na: 6, nb: 5, nc: 4, noise: 0.05, causes: map[string]float64{"a=a1&b=b3&c=c2": 0.3}}, "a=a1&b=b3&c=c2"},
		{"two causes on different layers", grid{na: 6, nb: 5, nc: 4, noise: 0.05, causes: map[string]float64{"a=a3": 0.6, "b=b2&c=c1": 0.6}}, "a=a3;b=b2&c=c1"},
		{"a rise", grid{na: 6, nb: 5, nc: 4, noise: 0.05, causes: map[string]float64{"b=b4": 1.8}}, "b=b4"},
		// Three of six children of c=c3 fail: the answer is the three, not
		// their parent.
		{"children, not their parent", grid{na: 6, nb: 5, nc: 4, noise: 0.05, causes: map[string]float64{"a=a1&c=c3": 0.4, "a=a2&c=c3": 0.4, "a=a5&c=c3": 0.4}}, "a=a1&c=c3;a=a2&c=c3;a=a5&c=c3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(3) {
				if got := localizeSet(t, tc.g.leaves(seed)); got != tc.expect {
					t.Errorf("seed %d: got %q, want %q", seed, got, tc.expect)
				}
			}
		})
	}
}

func TestLocalizeCandidateEvidence(t *testing.T) {
	leaves := grid{na: 4, nb: 3, nc: 2, noise: 0.02, causes: map[string]float64{"a=a2": 0.5}}.leaves(1)
	cands, err := Localize(leaves, Options{})
	if err != nil || len(cands) != 1 {
		t.Fatalf("got %v, %v", cands, err)
	}
	c := cands[0]
	var in, all Amounts
	for _, l := range leaves {
		all.Real += l.Real
		all.Predict += l.Predict
		if matchesElement(l.Terms, "a=a2") {
			in.Real += l.Real
			in.Predict += l.Predict
			in.Leaves++
		}
	}
	if c.Inside.Leaves != 6 || c.Outside.Leaves != 18 || math.Abs(c.Inside.Real-in.Real) > 1e-9 ||
		math.Abs(c.Inside.Predict+c.Outside.Predict-all.Predict) > 1e-9 {
		t.Errorf("evidence %+v, want inside %+v of %+v", c, in, all)
	}
	if math.Abs(c.Deviation+0.5) > 0.01 || c.Score <= 0 {
		t.Errorf("deviation %v (want -0.5), score %v (want > 0)", c.Deviation, c.Score)
	}
}

func TestLocalizeRejectsBadInput(t *testing.T) {
	ok := []Term{{"a", "x"}}
	for _, tc := range []struct {
		name   string
		leaves []Leaf
		want   error
	}{
		{"NaN", []Leaf{{Terms: ok, Real: math.NaN()}}, ErrBadAmount},
		{"Inf", []Leaf{{Terms: ok, Predict: math.Inf(1)}}, ErrBadAmount},
		{"no dimension", []Leaf{{Real: 1, Predict: 1}}, ErrNoDimensions},
	} {
		if _, err := Localize(tc.leaves, Options{}); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := Localize([]Leaf{{Terms: []Term{{"a", "x"}, {"a", "y"}}, Real: 1}}, Options{}); err == nil || !strings.Contains(err.Error(), `"a" twice`) {
		t.Errorf("a dimension twice: got %v", err)
	}
	if cands, err := Localize(nil, Options{}); cands != nil || err != nil {
		t.Errorf("no leaves: got %v, %v", cands, err)
	}
}

// A leaf that lacks a dimension takes the empty value, which can be the
// cause ("the attribute is missing").
func TestLocalizeMissingDimensionIsAValue(t *testing.T) {
	var leaves []Leaf
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 200 {
		terms := []Term{{"service", fmt.Sprint("s", i%5)}}
		if i%4 != 0 {
			terms = append(terms, Term{"model", fmt.Sprint("m", i%3)})
		}
		predict := 100.0
		real := predict * (1 + 0.03*rng.NormFloat64())
		if i%4 == 0 {
			real = 40
		}
		leaves = append(leaves, Leaf{Terms: terms, Real: real, Predict: predict})
	}
	if got := localizeSet(t, leaves); got != "model=" {
		t.Errorf("got %q, want model=", got)
	}
}

func TestLatticeIndexesEveryCuboid(t *testing.T) {
	leaves := grid{na: 3, nb: 2, nc: 2}.leaves(1)
	lat, err := newLattice(leaves, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(lat.cuboids) != 7 {
		t.Fatalf("%d cuboids, want 7", len(lat.cuboids))
	}
	for _, c := range lat.cuboids {
		want := 1
		for _, k := range c.dims {
			want *= []int{3, 2, 2}[k]
		}
		if c.elems != want {
			t.Errorf("cuboid %v: %d elements, want %d", c.dims, c.elems, want)
		}
		for e := range int32(c.elems) {
			el := lat.element(c, e)
			for _, li := range c.leavesOf(e) {
				if !matchesElement(leaves[li].Terms, el.String()) {
					t.Errorf("leaf %d listed under %s", li, el)
				}
			}
		}
	}
	// MaxLayer bounds the conjunctions.
	if lat, _ := newLattice(leaves, 1); len(lat.cuboids) != 3 {
		t.Errorf("MaxLayer 1: %d cuboids, want 3", len(lat.cuboids))
	}
}

func TestFitNoiseRecoversTheSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	// Relative noise of 10%, and a drop on 20% of the leaves that the fit
	// must not see (it reads the leaves departing the other way).
	var leaves []Leaf
	for i := range 5000 {
		predict := 10 + 1000*rng.Float64()
		real := predict * (1 + 0.1*rng.NormFloat64())
		if i%5 == 0 {
			real = predict * 0.3
		}
		leaves = append(leaves, Leaf{Real: real, Predict: predict})
	}
	nm := fitNoise(leaves, -1)
	if math.Abs(math.Sqrt(nm.rel)-0.1) > 0.015 || nm.abs > 0.5 {
		t.Errorf("relative noise: fitted %+v, want rel 0.1², abs ~0", nm)
	}
	// Counting noise: Poisson-like, relative variance 1/m.
	leaves = leaves[:0]
	for range 5000 {
		predict := 5 + 500*rng.Float64()
		real := predict + math.Sqrt(predict)*rng.NormFloat64()
		leaves = append(leaves, Leaf{Real: real, Predict: predict})
	}
	nm = fitNoise(leaves, 1)
	if math.Abs(nm.abs-1) > 0.25 || nm.rel > 0.002 {
		t.Errorf("counting noise: fitted %+v, want abs ~1, rel ~0", nm)
	}
}

func TestDirectionIsTheStrongestDeparture(t *testing.T) {
	// The totals rise (noise on a large leaf) while the clear cause drops.
	leaves := grid{na: 6, nb: 5, nc: 4, noise: 0.03, causes: map[string]float64{"a=a4&b=b2": 0.2}}.leaves(2)
	leaves[0].Real = leaves[0].Predict * 1.04
	leaves[0].Predict *= 1000
	leaves[0].Real *= 1000
	lat, _ := newLattice(leaves, 0)
	if got := lat.direction(observe(leaves, 0)); got != -1 {
		t.Errorf("direction %v, want -1", got)
	}
	if got := localizeSet(t, leaves); got != "a=a4&b=b2" {
		t.Errorf("got %q", got)
	}
}

func TestLeafLLR(t *testing.T) {
	// Gaussian: a leaf two standard deviations out, against a cause of
	// that size, gains about 2 nats (χ²/2) less the cost of the spread.
	obs := &observations{dev: []float64{0.2}, prec: []float64{100}, rate: []float64{-1}}
	if got := obs.leafLLR(0, 0.2); got < 1.5 || got > 2 {
		t.Errorf("Gaussian at its mean: %v, want in (1.5, 2]", got)
	}
	if got := obs.leafLLR(0, 0.6); got > 0 {
		t.Errorf("Gaussian far from the cause's deviation: %v, want < 0", got)
	}
	// Binomial: 3 failures out of 10 where 1% was expected is strong
	// evidence for a rate near 30%; 0 failures is evidence against it.
	obs = &observations{real: []float64{3, 0}, total: []float64{10, 10}, rate: []float64{0.01, 0.01}, dispersion: []float64{1, 1}}
	if got := obs.leafLLR(0, 0.29); got < 5 {
		t.Errorf("binomial 3/10 at 1%%: %v, want > 5 nats", got)
	}
	if got := obs.leafLLR(1, 0.29); got > -1 {
		t.Errorf("binomial 0/10 against 30%%: %v, want < -1", got)
	}
}
