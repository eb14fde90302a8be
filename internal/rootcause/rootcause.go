// Package rootcause localizes multi-dimensional root causes: given leaves (one
// combination of dimension values each, with an observed and an expected
// amount), it returns the few elements (conjunctions of dimension=value terms)
// that explain where the observed amounts depart from the expected ones.
// Subgroups ranks the same kind of elements over sampled units (rows with
// weights) instead of leaves. See README.md for the methods and their
// figures on the rcabench data.
package rootcause

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Term is one dimension's value, e.g. model_ver=v2.
type Term struct {
	Dim, Value string
}

// Element is a conjunction of terms, at most one per dimension, sorted by
// dimension. The empty element would be "everything" and is never returned.
type Element []Term

// String encodes the element as rcabench does: dim=value terms joined by "&",
// sorted.
func (e Element) String() string {
	terms := make([]string, len(e))
	for i, t := range e {
		terms[i] = t.Dim + "=" + t.Value
	}
	slices.Sort(terms)
	return strings.Join(terms, "&")
}

// Leaf is one combination of dimension values and its amounts at the time
// under study. A dimension a leaf does not name takes the empty value, which
// can be a root cause like any other value (e.g. "the attribute is missing").
type Leaf struct {
	Terms []Term
	// Real is the observed amount (e.g. failing requests in the window);
	// Predict the amount expected under normal behaviour. Both are additive.
	Real, Predict float64
	// Sigma is the standard deviation of Real under normal behaviour, where
	// the caller knows it (FromCounts does, from the baseline). 0: for a
	// leaf with a Total, binomial noise; otherwise Localize estimates the
	// noise from the leaves themselves (relative plus counting noise).
	Sigma float64
	// Total is the leaf's count of all events where Real and Predict count
	// some of them (failing requests among all requests): the leaf then
	// departs by a rate, (Real-Predict)/Total, its evidence is binomial (a
	// quasi-likelihood, with Sigma), and a root cause is where that rate
	// moved. 0: the leaf departs by (Real-Predict)/max(Real, Predict),
	// relative to its size, with Gaussian evidence.
	Total float64
}

// Amounts are the summed amounts of a set of leaves.
type Amounts struct {
	Real, Predict, Total float64
	Leaves               int
}

// Candidate is one root-cause element and the evidence behind it.
type Candidate struct {
	Element Element
	// Score is how much the element shortens the description of the data
	// (in nats): the log-likelihood gained by letting its leaves depart from
	// the expectation together, less the cost of naming it. It is > 0.
	Score float64
	// Deviation is the element's typical deviation, averaged over its
	// leaves by their precision: a rate difference for leaves with a Total
	// (+0.15: 15% more of the events are of the measured kind), else
	// relative (-0.4: 40% below the expectation).
	Deviation float64
	// Inside sums the leaves the element matches; Outside all the others.
	Inside, Outside Amounts
}

// Options tune Localize. The zero value is the tested default, used for
// every figure in README.md.
type Options struct {
	// MaxLayer is the largest number of terms of an element. 0: every layer
	// for up to 6 dimensions, 4 beyond (the lattice grows as 2^dimensions).
	MaxLayer int
	// MaxElements caps the number of root-cause elements returned. 0: 32.
	MaxElements int
}

const (
	defaultDeepDims    = 6
	defaultMaxLayer    = 4
	defaultMaxElements = 32
	// maxCardinality bounds the values of one dimension, so that element
	// keys of up to defaultMaxLayer dimensions fit in 64 bits.
	maxCardinality = 1 << 16
	maxDimensions  = 32
)

// Errors Localize returns for input it cannot use.
var (
	ErrNoDimensions = errors.New("rootcause: the leaves name no dimension")
	ErrBadAmount    = errors.New("rootcause: amount is not a finite number")
)

// Localize returns the root-cause elements that together explain how the
// leaves' Real amounts depart from their Predict amounts, best first. None
// (an empty slice) means nothing departs beyond the noise.
func Localize(leaves []Leaf, opts Options) ([]Candidate, error) {
	if len(leaves) == 0 {
		return nil, nil
	}
	for i, l := range leaves {
		for _, v := range []float64{l.Real, l.Predict, l.Sigma, l.Total} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("leaf %d: %w", i, ErrBadAmount)
			}
		}
	}
	lat, err := newLattice(leaves, opts.MaxLayer)
	if err != nil {
		return nil, err
	}
	maxElements := opts.MaxElements
	if maxElements <= 0 {
		maxElements = defaultMaxElements
	}
	obs := observe(leaves, lat.direction(observe(leaves, 0)))
	found := lat.search(obs, maxElements)
	return lat.candidates(found, obs), nil
}
