package rcabench

import (
	"math"
	"slices"
	"testing"

	"github.com/loom-otel/loom/internal/rootcause"
)

func TestParseSetNormalises(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Set
	}{
		// The README's example: a leaf and a 2-dimensional element.
		{"a=a8&b=b12&c=c4&d=d7&e=e2;a=a3&e=e1", Set{"a=a3&e=e1", "a=a8&b=b12&c=c4&d=d7&e=e2"}},
		// Terms sorted within an element, duplicates removed.
		{"e=e1&a=a3;a=a3&e=e1;b=b2", Set{"a=a3&e=e1", "b=b2"}},
		{"", nil},
		{";a=a1;", Set{"a=a1"}},
	} {
		if got := ParseSet(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("ParseSet(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := ParseSet("b=b2;a=a3&e=e1").String(); got != "a=a3&e=e1;b=b2" {
		t.Errorf("String() = %q", got)
	}
}

func TestScoreCountsOnlyExactElements(t *testing.T) {
	truth := ParseSet("a=a3&e=e1;b=b2")
	for _, tc := range []struct {
		name      string
		predicted string
		want      Tally
	}{
		{"exact", "b=b2;e=e1&a=a3", Tally{TP: 2}},
		{"a parent is wrong", "a=a3;b=b2", Tally{TP: 1, FP: 1, FN: 1}},
		{"a child is wrong", "a=a3&c=c1&e=e1;b=b2", Tally{TP: 1, FP: 1, FN: 1}},
		{"another dimension is wrong", "a=a3&d=d1;b=b2", Tally{TP: 1, FP: 1, FN: 1}},
		{"empty prediction", "", Tally{FN: 2}},
		{"duplicates count once", "b=b2;b=b2", Tally{TP: 1, FN: 1}},
	} {
		if got := Score(truth, ParseSet(tc.predicted)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestTallyFigures(t *testing.T) {
	// Micro-averaging: sums over cases, then the ratios.
	a := Score(ParseSet("a=a1;a=a2"), ParseSet("a=a1"))      // TP 1, FN 1
	b := Score(ParseSet("b=b1"), ParseSet("b=b1;b=b2;b=b3")) // TP 1, FP 2
	sum := a.Add(b)
	if sum != (Tally{TP: 2, FP: 2, FN: 1}) {
		t.Fatalf("sum %+v", sum)
	}
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-12 }
	if !near(sum.F1(), 4.0/7) || !near(sum.Precision(), 0.5) || !near(sum.Recall(), 2.0/3) {
		t.Errorf("F1 %v precision %v recall %v", sum.F1(), sum.Precision(), sum.Recall())
	}
	// Per-case F1 = 2TP/(2TP+FP+FN); the mean of those differs from the
	// micro F1.
	rep := Report{Cases: []CaseResult{{Tally: a}, {Tally: b}}, Tally: sum}
	if !near(rep.MeanF1(), (2.0/3+0.5)/2) {
		t.Errorf("mean per-case F1 %v", rep.MeanF1())
	}
	if (Tally{}).F1() != 1 || (Tally{}).Precision() != 0 {
		t.Errorf("nothing to find, nothing found: F1 %v precision %v", Tally{}.F1(), Tally{}.Precision())
	}
}

func TestSetOfCandidates(t *testing.T) {
	cands := []rootcause.Candidate{
		{Element: rootcause.Element{{Dim: "b", Value: "b2"}}},
		{Element: rootcause.Element{{Dim: "a", Value: "a3"}, {Dim: "e", Value: "e1"}}},
	}
	if got := SetOf(cands).String(); got != "a=a3&e=e1;b=b2" {
		t.Errorf("got %q", got)
	}
	if got := SetOf(nil).String(); got != "" {
		t.Errorf("none: got %q, want an empty line", got)
	}
}
