package rootcause

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sampledRows draws units with four dimensions; fail says whether a unit
// under its values fails (besides a 1% background). Failing units are kept
// at weight 1, healthy ones at 1 in keep with weight keep.
func sampledRows(n, keep int, seed uint64, fail func(v map[string]string) bool) []Row {
	rng := rand.New(rand.NewPCG(seed, 1))
	var rows []Row
	for range n {
		v := map[string]string{
			"model":    fmt.Sprint("m", rng.IntN(3)),
			"gpu":      fmt.Sprint("g", rng.IntN(8)),
			"adapter":  fmt.Sprint("a", rng.IntN(5)),
			"template": fmt.Sprint("t", rng.IntN(6)),
		}
		hit := rng.Float64() < 0.01 || fail(v) && rng.Float64() < 0.95
		weight := 1.0
		if !hit {
			if rng.IntN(keep) != 0 {
				continue
			}
			weight = float64(keep)
		}
		row := Row{Weight: weight, Hit: hit}
		for _, d := range []string{"model", "gpu", "adapter", "template"} {
			row.Terms = append(row.Terms, Term{d, v[d]})
		}
		rows = append(rows, row)
	}
	return rows
}

func TestSubgroupsSplitsCausesThatShareAParent(t *testing.T) {
	// Three incidents, each under a value of another dimension, all on model
	// m0: the broad m0 must not hide them.
	rows := sampledRows(60_000, 100, 1, func(v map[string]string) bool {
		return v["model"] == "m0" && (v["gpu"] == "g3" || v["adapter"] == "a4" || v["template"] == "t5")
	})
	found := Subgroups(rows, SubgroupOptions{})
	if len(found) < 3 {
		t.Fatalf("got %v, want the three incidents first", found)
	}
	var got []string
	for _, f := range found[:min(3, len(found))] {
		got = append(got, f.Element.String())
	}
	want := map[string]bool{"gpu=g3&model=m0": true, "adapter=a4&model=m0": true, "model=m0&template=t5": true}
	for _, g := range got {
		if !want[g] {
			t.Errorf("top three %v; want the three incidents %v", got, want)
			break
		}
	}
}

func TestSubgroupsFindsOneValueAndAPair(t *testing.T) {
	rows := sampledRows(40_000, 50, 2, func(v map[string]string) bool { return v["gpu"] == "g6" })
	if found := Subgroups(rows, SubgroupOptions{}); len(found) == 0 || found[0].Element.String() != "gpu=g6" {
		t.Errorf("got %v, want gpu=g6 first", found)
	}
	rows = sampledRows(40_000, 50, 3, func(v map[string]string) bool { return v["adapter"] == "a1" && v["template"] == "t2" })
	if found := Subgroups(rows, SubgroupOptions{}); len(found) == 0 || found[0].Element.String() != "adapter=a1&template=t2" {
		t.Errorf("got %v, want adapter=a1&template=t2 first", found)
	}
	if found := Subgroups(rows, SubgroupOptions{MaxTerms: 1}); len(found) == 0 || len(found[0].Element) != 1 {
		t.Errorf("MaxTerms 1: got %v", found)
	}
}

func TestSubgroupsNamesNothingWithoutEvidence(t *testing.T) {
	rows := sampledRows(40_000, 100, 4, func(map[string]string) bool { return false })
	if found := Subgroups(rows, SubgroupOptions{}); len(found) != 0 {
		t.Errorf("background failures only: got %v", found)
	}
	if found := Subgroups(nil, SubgroupOptions{}); found != nil {
		t.Errorf("no rows: got %v", found)
	}
	// A handful of failures under a value whose healthy units happened not
	// to be kept is no cause: their misses are unseen, not absent.
	few := []Row{{Terms: []Term{{"gpu", "g1"}}, Weight: 1, Hit: true}, {Terms: []Term{{"gpu", "g1"}}, Weight: 1, Hit: true}}
	for i := range 300 {
		few = append(few, Row{Terms: []Term{{"gpu", fmt.Sprint("g", 2+i%5)}}, Weight: 100})
	}
	for range 30 {
		few = append(few, Row{Terms: []Term{{"gpu", "g9"}}, Weight: 1, Hit: true})
	}
	if found := Subgroups(few, SubgroupOptions{}); len(found) != 0 && found[0].Element.String() == "gpu=g1" {
		t.Errorf("two failures without kept healthy units named first: %v", found)
	}
}

// TestSubgroupsExplainAwayAMixedParent: a GPU fails on host h0, and a bad
// template fails everywhere, h0 included; sampling kept almost no healthy
// request of h0. The host holds the most failures, but those beyond the
// GPU's are the template's: the GPU must be named, not the host.
func TestSubgroupsExplainAwayAMixedParent(t *testing.T) {
	gpus := map[string][]string{"h0": {"g0", "g1"}, "h1": {"g2", "g3"}, "h2": {"g4", "g5"}, "h3": {"g6", "g7"}}
	var rows []Row
	add := func(n int, host, gpu, template string, weight float64, hit bool) {
		for range n {
			rows = append(rows, Row{Terms: []Term{{"host", host}, {"gpu", gpu}, {"template", template}}, Weight: weight, Hit: hit})
		}
	}
	for i := range 90 {
		add(1, "h0", "g1", fmt.Sprint("t", 1+i%4), 1, true)
	}
	for _, host := range []string{"h0", "h1", "h2", "h3"} {
		n := 15
		if host == "h0" {
			n = 60
		}
		add(n, host, gpus[host][0], "t5", 1, true)
		if host != "h0" {
			for i := range 6 {
				add(1, host, gpus[host][i%2], fmt.Sprint("t", 1+i%4), 100, false)
			}
		}
	}
	add(1, "h0", "g0", "t1", 100, false)
	found := Subgroups(rows, SubgroupOptions{})
	var got []string
	for _, f := range found {
		got = append(got, f.Element.String())
	}
	if len(got) < 2 || !slices.Contains(got[:2], "gpu=g1") || !slices.Contains(got[:2], "template=t5") {
		t.Errorf("got %v; want gpu=g1 and template=t5 first", got)
	}
	if slices.Contains(got, "host=h0") {
		t.Errorf("got %v; host=h0 is the GPU's failures and the template's", got)
	}
}
