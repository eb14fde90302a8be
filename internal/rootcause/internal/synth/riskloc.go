// Package synth generates root-cause cases for validation: leaves in the
// riskloc format, written after the description of RiskLoc's generator in
// ../shared/rcabench/README.md (not its code), and per-minute counts like
// request data. Cases come with their true root-cause set in the rcabench
// encoding.
package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/loom-otel/loom/internal/rootcause"
)

// Range is a closed interval to draw from.
type Range [2]float64

func (r Range) draw(rng *rand.Rand) float64 { return r[0] + rng.Float64()*(r[1]-r[0]) }

// IntRange is a closed interval of integers.
type IntRange [2]int

func (r IntRange) draw(rng *rand.Rand) int { return r[0] + rng.IntN(r[1]-r[0]+1) }

// RisklocConfig are the generator's knobs, named as in the benchmark's
// README.
type RisklocConfig struct {
	Dims               []int // cardinality of each dimension (named a, b, c, ...)
	WeibullAlpha       Range
	ZeroRate           Range
	NoiseLevel         Range
	Severity           Range // plus the case's noise level
	Deviation          Range
	Anomalies          IntRange
	ElementsPerAnomaly IntRange
	OnlyLastLayer      bool
}

// S is the benchmark's S setting.
func S() RisklocConfig {
	return RisklocConfig{
		Dims: []int{10, 12, 10, 8, 5}, WeibullAlpha: Range{0.5, 1}, ZeroRate: Range{0, 0.25},
		NoiseLevel: Range{0, 0.25}, Severity: Range{0.2, 1}, Deviation: Range{0, 0.1},
		Anomalies: IntRange{1, 3}, ElementsPerAnomaly: IntRange{1, 3},
	}
}

// L is the benchmark's L setting: every root cause a leaf.
func L() RisklocConfig {
	return RisklocConfig{
		Dims: []int{10, 24, 10, 15}, WeibullAlpha: Range{0.5, 1}, ZeroRate: Range{0, 0.25},
		NoiseLevel: Range{0, 0.1}, Severity: Range{0.5, 1}, Deviation: Range{0, 0},
		Anomalies: IntRange{1, 5}, ElementsPerAnomaly: IntRange{1, 1}, OnlyLastLayer: true,
	}
}

// Case is one generated case.
type Case struct {
	Leaves []rootcause.Leaf
	// Rows are the per-minute counts of a counts case (Leaves is nil), and
	// At its anomalous minute.
	Rows  []rootcause.CountRow
	At    int64
	Truth string
}

// anomaly is a set of elements on one set of dimensions, departing alike.
type anomaly struct {
	dims     []int
	elements [][]int // value index per dim of dims
}

// Riskloc draws one case: every leaf of the Cartesian product, Weibull real
// amounts ×100 with some zeroed, predict within relative Gaussian noise of
// real (the two swapped at random per leaf); then, in every leaf below an
// anomalous element, one side scaled by (1-r), r ~ N(severity, deviation),
// the way the overall forecast error already points.
func Riskloc(rng *rand.Rand, cfg RisklocConfig) Case {
	nd := len(cfg.Dims)
	zeroRate := cfg.ZeroRate.draw(rng)
	noise := cfg.NoiseLevel.draw(rng)
	alpha := cfg.WeibullAlpha.draw(rng)
	n := 1
	for _, c := range cfg.Dims {
		n *= c
	}
	codes := make([][]int, n)
	real := make([]float64, n)
	predict := make([]float64, n)
	for i := range n {
		codes[i] = make([]int, nd)
		rest := i
		for k := nd - 1; k >= 0; k-- {
			codes[i][k] = rest % cfg.Dims[k]
			rest /= cfg.Dims[k]
		}
		v := math.Pow(-math.Log(1-rng.Float64()), 1/alpha) * 100
		if rng.Float64() < zeroRate {
			v = 0
		}
		p := v + v*rng.NormFloat64()*noise
		if rng.IntN(2) == 1 {
			v, p = p, v
		}
		real[i], predict[i] = v, max(p, 0)
	}
	var sumReal, sumPredict float64
	for i := range n {
		sumReal += real[i]
		sumPredict += predict[i]
	}
	dropReal := sumReal <= sumPredict

	var anomalies []anomaly
	var labels []string
	count := cfg.Anomalies.draw(rng)
	for range count {
		level := nd
		if !cfg.OnlyLastLayer {
			level = 1 + rng.IntN(nd)
		}
		a, ok := placeAnomaly(rng, cfg.Dims, level, cfg.ElementsPerAnomaly.draw(rng), anomalies, real)
		if !ok {
			continue
		}
		anomalies = append(anomalies, a)
		severity := cfg.Severity.draw(rng) + noise
		deviation := cfg.Deviation.draw(rng)
		for i := range n {
			if !a.covers(codes[i]) {
				continue
			}
			r := severity + rng.NormFloat64()*deviation
			if dropReal {
				real[i] = max(predict[i]*(1-r), 0)
			} else {
				predict[i] = max(real[i]*(1-r), 0)
			}
		}
		for _, el := range a.elements {
			terms := make([]string, len(a.dims))
			for j, k := range a.dims {
				terms[j] = term(k, el[j])
			}
			slices.Sort(terms)
			labels = append(labels, strings.Join(terms, "&"))
		}
	}
	leaves := make([]rootcause.Leaf, n)
	for i := range n {
		terms := make([]rootcause.Term, nd)
		for k := range nd {
			terms[k] = rootcause.Term{Dim: dimName(k), Value: term(k, codes[i][k])[2:]}
		}
		leaves[i] = rootcause.Leaf{Terms: terms, Real: real[i], Predict: predict[i]}
	}
	return Case{Leaves: leaves, Truth: strings.Join(labels, ";")}
}

func dimName(k int) string { return string(rune('a' + k)) }

// term is "a=a3" for dimension 0, value index 2.
func term(dim, value int) string {
	return fmt.Sprintf("%s=%s%d", dimName(dim), dimName(dim), value+1)
}

func (a anomaly) covers(codes []int) bool {
	return slices.ContainsFunc(a.elements, func(el []int) bool { return matches(codes, a.dims, el) })
}

// placeAnomaly picks the dimensions and elements of a new anomaly: not the
// dimensions of an earlier one (except on the last layer), no value an
// earlier anomaly uses on a shared dimension, distinct elements, and on the
// last layer no leaf whose real amount is 0. It gives up after many tries.
func placeAnomaly(rng *rand.Rand, cards []int, level, elements int, earlier []anomaly, real []float64) (anomaly, bool) {
	nd := len(cards)
	for range 1000 {
		dims := rng.Perm(nd)[:level]
		slices.Sort(dims)
		if level < nd && slices.ContainsFunc(earlier, func(a anomaly) bool { return slices.Equal(a.dims, dims) }) {
			continue
		}
		a := anomaly{dims: dims, elements: make([][]int, elements)}
		ok := true
		for j, k := range dims {
			var free []int
			for v := range cards[k] {
				used := false
				for _, e := range earlier {
					if i := slices.Index(e.dims, k); i >= 0 {
						for _, el := range e.elements {
							used = used || el[i] == v
						}
					}
				}
				if !used {
					free = append(free, v)
				}
			}
			if len(free) == 0 {
				ok = false
				break
			}
			for el := range a.elements {
				if j == 0 {
					a.elements[el] = make([]int, len(dims))
				}
				a.elements[el][j] = free[rng.IntN(len(free))]
			}
		}
		if !ok || !distinct(a.elements) {
			continue
		}
		if level == nd && slices.ContainsFunc(a.elements, func(el []int) bool { return real[leafIndex(cards, el)] == 0 }) {
			continue
		}
		return a, true
	}
	return anomaly{}, false
}

func distinct(elements [][]int) bool {
	for i := range elements {
		for j := range i {
			if slices.Equal(elements[i], elements[j]) {
				return false
			}
		}
	}
	return true
}

func leafIndex(cards, values []int) int {
	i := 0
	for k, c := range cards {
		i = i*c + values[k]
	}
	return i
}
