package rootcause_test

import (
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/loom-otel/loom/internal/rootcause"
	"github.com/loom-otel/loom/internal/rootcause/internal/synth"
	"github.com/loom-otel/loom/internal/rootcause/rcabench"
)

type family struct {
	name string
	draw func(*rand.Rand) synth.Case
	// floor is the F1 the family must reach: below what 100 cases of it
	// reach today (README), with room for the spread of a few cases.
	floor float64
}

func families() []family {
	counts := func(shape synth.Shape) func(*rand.Rand) synth.Case {
		return func(rng *rand.Rand) synth.Case {
			cfg := synth.Requests()
			cfg.Shape = shape
			return synth.Counts(rng, cfg)
		}
	}
	return []family{
		{"S-like", func(rng *rand.Rand) synth.Case { return synth.Riskloc(rng, synth.S()) }, 0.85},
		{"L-like", func(rng *rand.Rand) synth.Case { return synth.Riskloc(rng, synth.L()) }, 0.9},
		{"counts", counts(synth.AnyShape), 0.8},
		{"counts-single-leaf", counts(synth.SingleLeaf), 0.6},
		{"counts-two-layers", counts(synth.TwoLayers), 0.75},
	}
}

func localizeCase(t testing.TB, c synth.Case) (rcabench.Set, time.Duration) {
	start := time.Now()
	leaves := c.Leaves
	if c.Rows != nil {
		var err error
		if leaves, err = rootcause.FromCounts(c.Rows, c.At); err != nil {
			t.Fatal(err)
		}
	}
	cands, err := rootcause.Localize(leaves, rootcause.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rcabench.SetOf(cands), time.Since(start)
}

// TestGeneratedValidation scores the localizer on cases drawn from our own
// generators (internal/synth): riskloc cases like S and L with other seeds,
// and counts cases like request data, with dimension names and values that
// are random words. LOOMRCA_VALIDATION_CASES sets the cases per family
// (default 4) and LOOMRCA_VALIDATION_SEED the seed (default 1).
func TestGeneratedValidation(t *testing.T) {
	n := envInt("LOOMRCA_VALIDATION_CASES", 4)
	seed := envInt("LOOMRCA_VALIDATION_SEED", 1)
	for fi, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(fi)))
			var tally rcabench.Tally
			var worst time.Duration
			for i := range n {
				c := f.draw(rng)
				got, took := localizeCase(t, c)
				truth := rcabench.ParseSet(c.Truth)
				ct := rcabench.Score(truth, got)
				tally = tally.Add(ct)
				worst = max(worst, took)
				if testing.Verbose() && ct.F1() < 1 {
					t.Logf("case %d: TP=%d FP=%d FN=%d\n  got   %s\n  truth %s", i, ct.TP, ct.FP, ct.FN, got, truth)
				}
			}
			t.Logf("%s: cases=%d F1=%.3f precision=%.3f recall=%.3f TP=%d FP=%d FN=%d max=%.2fs",
				f.name, n, tally.F1(), tally.Precision(), tally.Recall(), tally.TP, tally.FP, tally.FN, worst.Seconds())
			if tally.F1() < f.floor {
				t.Errorf("%s: F1 %.3f, want >= %.2f", f.name, tally.F1(), f.floor)
			}
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// BenchmarkLocalize times one S-like case (48,000 leaves, 5 dimensions)
// per operation, with its time and memory per leaf.
func BenchmarkLocalize(b *testing.B) {
	c := synth.Riskloc(rand.New(rand.NewPCG(1, 1)), synth.S())
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		if _, err := rootcause.Localize(c.Leaves, rootcause.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perLeaf := float64(b.N) * float64(len(c.Leaves))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perLeaf, "ns/leaf")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/perLeaf, "B/leaf")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/perLeaf, "allocs/leaf")
}
