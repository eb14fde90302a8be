package rootcause

import (
	"cmp"
	"math"
	"slices"
)

// Row is one observed unit (a request) of a window: its values, how many
// units it stands for, and whether it is of the measured kind (it failed).
// Rows are what Subgroups ranks when units are sampled unevenly: every
// failing request kept, healthy ones at a base rate with a weight of
// 1/rate each, so that a leaf of values holds too few kept units for
// Localize's per-leaf evidence.
type Row struct {
	// Terms holds at most one value per dimension; a dimension the row
	// lacks can never be part of its subgroups.
	Terms  []Term
	Weight float64
	Hit    bool
}

// SubgroupOptions tune Subgroups; the zero value is the tested default.
type SubgroupOptions struct {
	// MaxTerms is the most terms of a subgroup: 1 or 2 (0: 2).
	MaxTerms int
	// MaxResults caps the subgroups returned (0: 10).
	MaxResults int
}

// Subgroup is a conjunction of terms under which hits are far more frequent
// than in all rows, with the evidence for it.
type Subgroup struct {
	Element Element
	// Score is the log-likelihood ratio, in nats, of the subgroup's own hit
	// rate against the rate of all rows, less the cost of naming it.
	Score float64
}

const (
	defaultSubgroupTerms   = 2
	defaultSubgroupResults = 10
	// subgroupSeeds is how many of the best single terms are paired.
	subgroupSeeds = 40
	// minSubgroupScore: a subgroup must be worth this many nats beyond its
	// naming cost (e^5 ≈ 150:1).
	minSubgroupScore = 5.0
	// pairGain: a pair is named instead of its better term only when it is
	// worth this many nats more (naming a second value has a cost).
	pairGain = 3.0
)

// Subgroups ranks the conjunctions of at most MaxTerms values under which
// the rows' hits concentrate, best first, greedily: score every value
// alone (and pairs of the best of them) on the rows no chosen subgroup
// covers, take the best, cover all of its rows, and repeat until nothing is
// worth naming.
//
// A subgroup's weight of misses is estimated from the sampled rows, with
// half a base weight (the largest weight of a miss) added, so that a few
// hits whose misses happened not to be kept do not look like a cause.
func Subgroups(rows []Row, opts SubgroupOptions) []Subgroup {
	maxTerms := cmp.Or(opts.MaxTerms, defaultSubgroupTerms)
	maxResults := cmp.Or(opts.MaxResults, defaultSubgroupResults)
	var hits, weight, base float64
	for _, r := range rows {
		weight += r.Weight
		if r.Hit {
			hits += r.Weight
		} else {
			base = max(base, r.Weight)
		}
	}
	if hits == 0 || weight <= hits {
		return nil
	}
	sg := newSubgroupIndex(rows)
	s := &subgroupSearch{idx: sg, p0: hits / weight, prior: base / 2, covered: make([]bool, len(rows)),
		singleCost: math.Log(float64(max(sg.terms, 1)))}
	var chosen []scored
	for len(chosen) < maxResults {
		best, ok := s.best(maxTerms)
		if !ok {
			break
		}
		chosen = append(chosen, best)
		for _, r := range best.rows {
			s.covered[r] = true
		}
	}
	s.explainAway(chosen)
	out := make([]Subgroup, len(chosen))
	for i := range chosen {
		out[i] = chosen[i].subgroup(sg)
	}
	return out
}

// Explaining away: a chosen subgroup can be a mixture, its failing rows
// partly those of other chosen subgroups (a host that runs the GPU that
// fails, and requests of other causes that merely passed through it). When
// the others explain a tenth or more of its hits and one value, narrower
// than the subgroup (under 95% of its weight) and lying inside it, holds
// nine tenths of the hits left, that value is the better explanation and
// takes the subgroup's place.
const (
	mixtureShare   = 0.9
	narrowerWeight = 0.95
)

func (s *subgroupSearch) explainAway(chosen []scored) {
	idx := s.idx
	rowsOf := func(c *scored) []int32 {
		rows := idx.rowsOf[c.terms[0]]
		var out []int32
		for _, r := range rows {
			if s.matches(r, c.terms) {
				out = append(out, r)
			}
		}
		return out
	}
	for i := range chosen {
		parent := rowsOf(&chosen[i])
		var hits, own, weight float64
		ownRows := map[int32]bool{}
		for _, r := range parent {
			row := &idx.rows[r]
			weight += row.Weight
			if !row.Hit {
				continue
			}
			hits += row.Weight
			explained := false
			for j := range chosen {
				explained = explained || j != i && s.matches(r, chosen[j].terms)
			}
			if !explained {
				own += row.Weight
				ownRows[r] = true
			}
		}
		if own >= mixtureShare*hits || own == 0 {
			continue
		}
		var best scored
		for t := range int32(idx.terms) {
			if slices.Contains(chosen[i].terms, t) {
				continue
			}
			var inside, total, ownHits, tHits float64
			for _, r := range idx.rowsOf[t] {
				row := &idx.rows[r]
				total += row.Weight
				if s.matches(r, chosen[i].terms) {
					inside += row.Weight
				}
				if row.Hit {
					tHits += row.Weight
					if ownRows[r] {
						ownHits += row.Weight
					}
				}
			}
			if inside < total || total >= narrowerWeight*weight || ownHits < mixtureShare*own {
				continue
			}
			c := scored{terms: []int32{t}, rows: idx.rowsOf[t], hits: tHits, miss: total - tHits}
			c.score = s.llr(c.hits, c.miss) - s.singleCost
			if c.score > best.score {
				best = c
			}
		}
		if best.score > minSubgroupScore {
			chosen[i] = best
		}
	}
}

// matches reports whether row r carries every term.
func (s *subgroupSearch) matches(r int32, terms []int32) bool {
	for _, t := range terms {
		if s.idx.codes[int(r)*s.idx.dims+int(s.idx.dimOf[t])] != t {
			return false
		}
	}
	return true
}

// subgroupIndex codes the rows' terms: term t is (dim, value), rowsOf[t]
// the rows that have it, codes[row*dims+dim] a row's term there (-1: none).
type subgroupIndex struct {
	rows   []Row
	terms  int
	dims   int
	term   []Term
	rowsOf [][]int32
	dimOf  []int32
	codes  []int32
}

func newSubgroupIndex(rows []Row) *subgroupIndex {
	idx := &subgroupIndex{rows: rows}
	dims := map[string]int32{}
	for _, r := range rows {
		for _, t := range r.Terms {
			if _, ok := dims[t.Dim]; !ok && t.Value != "" {
				dims[t.Dim] = int32(len(dims))
			}
		}
	}
	idx.dims = len(dims)
	idx.codes = make([]int32, len(rows)*idx.dims)
	for i := range idx.codes {
		idx.codes[i] = -1
	}
	codes := map[Term]int32{}
	for i, r := range rows {
		for _, t := range r.Terms {
			if t.Value == "" {
				continue
			}
			c, ok := codes[t]
			if !ok {
				c = int32(len(idx.term))
				codes[t] = c
				idx.term = append(idx.term, t)
				idx.rowsOf = append(idx.rowsOf, nil)
				idx.dimOf = append(idx.dimOf, dims[t.Dim])
			}
			idx.rowsOf[c] = append(idx.rowsOf[c], int32(i))
			idx.codes[i*idx.dims+int(dims[t.Dim])] = c
		}
	}
	idx.terms = len(idx.term)
	return idx
}

type subgroupSearch struct {
	idx        *subgroupIndex
	p0, prior  float64
	covered    []bool
	singleCost float64
}

// scored is a candidate subgroup on the uncovered rows.
type scored struct {
	terms      []int32
	rows       []int32
	hits, miss float64
	score      float64
}

func (c *scored) subgroup(idx *subgroupIndex) Subgroup {
	e := make(Element, len(c.terms))
	for i, t := range c.terms {
		e[i] = idx.term[t]
	}
	slices.SortFunc(e, func(a, b Term) int { return cmp.Compare(a.Dim, b.Dim) })
	return Subgroup{Element: e, Score: c.score}
}

// evaluate sums rows (uncovered) and scores them.
func (s *subgroupSearch) evaluate(terms []int32, rows []int32, cost float64) scored {
	c := scored{terms: terms}
	for _, r := range rows {
		if s.covered[r] {
			continue
		}
		c.rows = append(c.rows, r)
		if row := &s.idx.rows[r]; row.Hit {
			c.hits += row.Weight
		} else {
			c.miss += row.Weight
		}
	}
	c.score = s.llr(c.hits, c.miss) - cost
	return c
}

// llr is the binomial log-likelihood ratio of hits among hits+miss (plus
// the prior's unseen misses) at their own rate against the rate of all
// rows; 0 where the rate is not above it.
func (s *subgroupSearch) llr(hits, miss float64) float64 {
	miss += s.prior
	total := hits + miss
	if total <= 0 || hits <= 0 {
		return 0
	}
	r := hits / total
	if r <= s.p0 {
		return 0
	}
	v := hits * math.Log(r/s.p0)
	if miss > 0 {
		v += miss * math.Log((1-r)/(1-s.p0))
	}
	return v
}

// best is the best subgroup on the uncovered rows, if one is worth naming.
func (s *subgroupSearch) best(maxTerms int) (scored, bool) {
	idx := s.idx
	singles := make([]scored, 0, idx.terms)
	for t := range int32(idx.terms) {
		if c := s.evaluate([]int32{t}, idx.rowsOf[t], s.singleCost); c.hits > 0 {
			singles = append(singles, c)
		}
	}
	if len(singles) == 0 {
		return scored{}, false
	}
	slices.SortFunc(singles, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.terms[0], b.terms[0]))
	})
	top := singles[0]
	if maxTerms >= 2 {
		seeds := singles[:min(len(singles), subgroupSeeds)]
		pairCost := math.Log(float64(max(idx.terms*(idx.terms-1)/2, 1)))
		for i := range seeds {
			for j := i + 1; j < len(seeds); j++ {
				a, b := seeds[i].terms[0], seeds[j].terms[0]
				if idx.dimOf[a] == idx.dimOf[b] {
					continue
				}
				var both []int32
				for _, r := range seeds[i].rows {
					if idx.codes[int(r)*idx.dims+int(idx.dimOf[b])] == b {
						both = append(both, r)
					}
				}
				pair := s.evaluate([]int32{a, b}, both, pairCost)
				if pair.score > max(seeds[i].score, seeds[j].score)+pairGain && pair.score > top.score {
					top = pair
				}
			}
		}
	}
	return top, top.score > minSubgroupScore
}
