package rcabench

import (
	"slices"
	"strings"

	"github.com/loom-otel/loom/internal/rootcause"
)

// Set is a normalised root-cause set: each element's dim=value terms sorted
// and joined by "&", the elements sorted, without duplicates.
type Set []string

// ParseSet normalises a set written as rcabench does: elements separated by
// ";", terms by "&". Empty elements are dropped, so "" is the empty set (the
// benchmark's ground truth is never empty).
func ParseSet(s string) Set {
	var set Set
	for _, el := range strings.Split(s, ";") {
		if el == "" {
			continue
		}
		terms := strings.Split(el, "&")
		slices.Sort(terms)
		set = append(set, strings.Join(terms, "&"))
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// SetOf is the set of the candidates' elements.
func SetOf(cands []rootcause.Candidate) Set {
	set := make(Set, 0, len(cands))
	for _, c := range cands {
		set = append(set, c.Element.String())
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// String encodes the set as rcabench does ("" for none).
func (s Set) String() string { return strings.Join(s, ";") }

// Tally counts exact element matches: a parent, a child or an element with
// another dimension is as wrong as any other.
type Tally struct{ TP, FP, FN int }

// Score compares a predicted set against the true one.
func Score(truth, predicted Set) Tally {
	tp := 0
	for _, el := range predicted {
		if _, ok := slices.BinarySearch(truth, el); ok {
			tp++
		}
	}
	return Tally{TP: tp, FP: len(predicted) - tp, FN: len(truth) - tp}
}

// Add sums tallies (micro-averaging).
func (t Tally) Add(o Tally) Tally { return Tally{t.TP + o.TP, t.FP + o.FP, t.FN + o.FN} }

// F1 is 2TP/(2TP+FP+FN); 1 when there was nothing to find and nothing was
// found.
func (t Tally) F1() float64 {
	if d := 2*t.TP + t.FP + t.FN; d > 0 {
		return float64(2*t.TP) / float64(d)
	}
	return 1
}

// Precision is TP/(TP+FP), 0 when nothing was predicted.
func (t Tally) Precision() float64 { return ratio(t.TP, t.TP+t.FP) }

// Recall is TP/(TP+FN), 0 when there was nothing to find.
func (t Tally) Recall() float64 { return ratio(t.TP, t.TP+t.FN) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
