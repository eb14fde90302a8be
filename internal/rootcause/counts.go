package rootcause

import (
	"errors"
	"math"
	"slices"
	"strings"
)

// CountRow is one leaf's counts in one minute, the shape of request data:
// Value events of the measured kind (e.g. failing requests) among Count
// events (all requests) in the minute starting at Minute (unix seconds).
type CountRow struct {
	Minute       int64
	Terms        []Term
	Value, Count float64
}

// ErrNoBaseline is returned by FromCounts when no row precedes the anomalous
// minute.
var ErrNoBaseline = errors.New("rootcause: no counts before the anomalous minute to learn the baseline from")

// FromCounts turns per-minute counts into leaves: the rows of minute at are
// the anomaly, the rows of earlier minutes the baseline (later ones are
// ignored). A leaf's Real is its Value at minute at, its Predict the Count
// at minute at times its baseline rate Value/Count, and its Sigma the
// standard deviation of Real that the baseline implies. Only leaves with
// rows at minute at are returned.
//
// A leaf's baseline rate is shrunk toward the rate of all leaves, the more
// so the fewer its baseline events and the more alike the leaves' rates are
// (an empirical-Bayes beta-binomial prior), so a leaf first seen at minute at
// is expected to behave like the rest. Sigma is the binomial spread at that
// rate, widened by the rate's own uncertainty and by how much more the
// baseline minutes scatter than binomial counts would.
func FromCounts(rows []CountRow, at int64) ([]Leaf, error) {
	type history struct {
		terms            []Term
		value, count     float64 // baseline sums
		nowV, nowC       float64 // minute at
		now              bool
		minuteV, minuteC []float64
	}
	byKey := map[string]*history{}
	var order []*history
	var key strings.Builder
	var baseValue, baseCount float64
	for _, r := range rows {
		if r.Minute > at {
			continue
		}
		key.Reset()
		terms := slices.Clone(r.Terms)
		slices.SortFunc(terms, func(a, b Term) int { return strings.Compare(a.Dim, b.Dim) })
		for _, t := range terms {
			key.WriteString(t.Dim)
			key.WriteByte(0)
			key.WriteString(t.Value)
			key.WriteByte(0)
		}
		h, ok := byKey[key.String()]
		if !ok {
			h = &history{terms: terms}
			byKey[key.String()] = h
			order = append(order, h)
		}
		if r.Minute == at {
			h.nowV += r.Value
			h.nowC += r.Count
			h.now = true
			continue
		}
		h.value += r.Value
		h.count += r.Count
		h.minuteV = append(h.minuteV, r.Value)
		h.minuteC = append(h.minuteC, r.Count)
		baseValue += r.Value
		baseCount += r.Count
	}
	if baseCount <= 0 {
		return nil, ErrNoBaseline
	}
	// With no baseline event of the measured kind, half an event keeps
	// the rate above zero.
	p0 := max(baseValue, 0.5) / (baseCount + 1)
	p0 = min(p0, 1-1/(baseCount+2))

	// Empirical Bayes: the spread of the leaves' rates beyond binomial
	// noise sets how strongly a leaf's rate is pulled toward p0.
	var between, weight float64
	for _, h := range order {
		if h.count <= 0 {
			continue
		}
		r := h.value / h.count
		between += h.count * ((r-p0)*(r-p0) - p0*(1-p0)/h.count)
		weight += h.count
	}
	tau2 := max(between/weight, 1e-12)
	prior := min(max(p0*(1-p0)/tau2-1, 1), 1e9)

	// Overdispersion: how much more the baseline minutes scatter around
	// each leaf's rate than binomial counts do.
	var chi2, dof float64
	rate := func(h *history) float64 { return (h.value + prior*p0) / (h.count + prior) }
	for _, h := range order {
		p := rate(h)
		for i, c := range h.minuteC {
			if c <= 0 {
				continue
			}
			r := h.minuteV[i] - c*p
			chi2 += r * r / (c * p * (1 - p))
			dof++
		}
	}
	dispersion := 1.0
	if dof > 0 {
		dispersion = max(chi2/dof, 1)
	}

	leaves := make([]Leaf, 0, len(order))
	for _, h := range order {
		if !h.now {
			continue
		}
		p := rate(h)
		variance := dispersion*h.nowC*p*(1-p) + h.nowC*h.nowC*p*(1-p)/(h.count+prior+1)
		leaves = append(leaves, Leaf{
			Terms:   h.terms,
			Real:    h.nowV,
			Predict: h.nowC * p,
			Sigma:   math.Sqrt(variance),
			Total:   h.nowC,
		})
	}
	return leaves, nil
}
