package rootcause

import (
	"cmp"
	"math"
	"slices"
)

// The search, round by round:
//
//  1. Score each element alone (own) on the leaves no chosen element
//     covers: the log-likelihood ratio of "its leaves depart together, by
//     about one typical deviation" against "they are normal", less the cost
//     of naming it.
//  2. Score each element as its best explanation (best): itself, or the best
//     explanations of its children along one more dimension, whichever is
//     worth more. A parent that mixes departing and normal children loses to
//     the departing children; one whose children all depart alike wins,
//     being cheaper to name than all of them.
//  3. Take the element with the highest own score among those that explain
//     themselves best, lift it to the cause it may be part of (see lift),
//     and cover its leaves. Only the elements that share those leaves are
//     scored again.
//
// It stops when no element is worth its name.

// elemStats is the evidence of one element over the uncovered leaves.
type elemStats struct {
	n  float64 // leaves with evidence
	w  float64 // Σ precision
	wd float64 // Σ precision·deviation: wd/w is the typical deviation
	// size is Σ leaf size (Total where leaves have one, else max(real,
	// predict)).
	size float64
	// llr is Σ leafLLR at the typical deviation, for a scored element: one
	// that departs in the direction searched and whose mean departure alone
	// is worth its name (the spread leafLLR allows adds little).
	llr    float64
	scored bool
	own    float64 // net of the naming cost; -Inf when not scored
	best   float64
	// split is -1 when the element explains itself best, else the
	// dimension along which its children do.
	split int8
}

// search state: the lattice's evidence under one direction.
type state struct {
	lat     *lattice
	obs     *observations
	sign    float64 // the direction searched; 0: each element its own
	covered []bool
	stats   [][]elemStats // by cuboid index
	split   [][]float64   // by cuboid index, elems × dims
	stamp   []int32       // for rescoring each touched element once
	round   int32
}

func (lat *lattice) newState(obs *observations, sign float64) *state {
	st := &state{lat: lat, obs: obs, sign: sign, covered: make([]bool, lat.leaves)}
	most := 0
	for _, c := range lat.cuboids {
		st.stats = append(st.stats, make([]elemStats, c.elems))
		st.split = append(st.split, make([]float64, c.elems*len(lat.dims)))
		most = max(most, c.elems)
	}
	st.stamp = make([]int32, most)
	for _, c := range lat.cuboids {
		for e := range int32(c.elems) {
			st.sum(c, e)
			if st.sign != 0 {
				st.score(c, e)
			}
		}
	}
	return st
}

// sum adds up element e of cuboid c over the uncovered leaves.
func (st *state) sum(c *cuboid, e int32) {
	s := &st.stats[c.index][e]
	*s = elemStats{}
	obs := st.obs
	for _, li := range c.leavesOf(e) {
		if w := obs.prec[li]; w != 0 && !st.covered[li] {
			s.add(obs, li, 1)
		}
	}
}

// add adds (sign 1) or removes (-1) leaf li's evidence.
func (s *elemStats) add(obs *observations, li int32, sign float64) {
	w := obs.prec[li]
	s.n += sign
	s.w += sign * w
	s.wd += sign * w * obs.dev[li]
	s.size += sign * obs.size[li]
}

// score scores element e of cuboid c from its sums: its leaves' likelihood
// if its mean departure alone is worth its name, in the direction searched
// (its own for sign 0).
func (st *state) score(c *cuboid, e int32) {
	s := &st.stats[c.index][e]
	s.llr, s.scored, s.own = 0, false, math.Inf(-1)
	sign := cmp.Or(st.sign, math.Copysign(1, s.wd))
	if s.n < 0.5 || s.w <= 0 || s.wd*sign <= 0 || 0.5*s.wd*s.wd/s.w <= c.penalty {
		return
	}
	s.scored = true
	mu := s.wd / s.w
	obs := st.obs
	for _, li := range c.leavesOf(e) {
		if obs.prec[li] != 0 && !st.covered[li] {
			s.llr += obs.leafLLR(int(li), mu)
		}
	}
	s.own = s.llr - c.penalty - 0.5*math.Log(s.n+1)
}

// cover marks the leaves of element e of cuboid c covered, takes them out
// of the sums of the elements that held them, and scores those again.
func (st *state) cover(c *cuboid, e int32) {
	var newly []int32
	for _, li := range c.leavesOf(e) {
		if !st.covered[li] {
			st.covered[li] = true
			if st.obs.prec[li] != 0 {
				newly = append(newly, li)
			}
		}
	}
	for _, cc := range st.lat.cuboids {
		st.round++
		stats := st.stats[cc.index]
		var touched []int32
		for _, li := range newly {
			te := cc.leafElem[li]
			stats[te].add(st.obs, li, -1)
			if st.stamp[te] != st.round {
				st.stamp[te] = st.round
				touched = append(touched, te)
			}
		}
		for _, te := range touched {
			st.score(cc, te)
		}
	}
}

// direction is the way the strongest element departs (by its own score),
// +1 or -1: root causes are taken to depart one way, as an incident moves a
// measure one way. Where nothing stands out, it is the way the totals moved.
func (lat *lattice) direction(obs *observations) float64 {
	st := lat.newState(obs, 0)
	var sumReal, sumPredict float64
	for li := range lat.leaves {
		sumReal += obs.real[li]
		sumPredict += obs.predict[li]
	}
	// The strongest few elements each way by their mean departure are
	// scored in full.
	type pick struct {
		c     *cuboid
		e     int32
		shift float64
	}
	var up, down []pick // the directionCandidates largest shifts, unordered
	keep := func(picks []pick, p pick) []pick {
		if len(picks) < directionCandidates {
			return append(picks, p)
		}
		weakest := 0
		for i := range picks {
			if picks[i].shift < picks[weakest].shift {
				weakest = i
			}
		}
		if p.shift > picks[weakest].shift {
			picks[weakest] = p
		}
		return picks
	}
	for _, c := range lat.cuboids {
		for e, s := range st.stats[c.index] {
			if s.w <= 0 || s.wd == 0 {
				continue
			}
			p := pick{c, int32(e), 0.5*s.wd*s.wd/s.w - c.penalty}
			if p.shift <= 0 {
				continue // cannot be scored
			}
			if s.wd > 0 {
				up = keep(up, p)
			} else {
				down = keep(down, p)
			}
		}
	}
	strongest := func(picks []pick) float64 {
		best := 0.0
		for _, p := range picks {
			st.score(p.c, p.e)
			best = max(best, st.stats[p.c.index][p.e].own)
		}
		return best
	}
	upScore, downScore := strongest(up), strongest(down)
	switch {
	case upScore > downScore:
		return 1
	case downScore > upScore:
		return -1
	case sumReal < sumPredict:
		return -1
	}
	return 1
}

// directionCandidates is how many elements each way direction scores.
const directionCandidates = 64

type found struct {
	c     *cuboid
	e     int32
	score float64
}

func (lat *lattice) search(obs *observations, maxElements int) []found {
	st := lat.newState(obs, obs.sign)
	var result []found
	for len(result) < maxElements {
		st.bestExplanations()
		var top *cuboid
		topElem, topScore := int32(-1), 0.0
		for _, c := range lat.cuboids {
			for e, s := range st.stats[c.index] {
				if s.own > topScore && s.split < 0 {
					top, topElem, topScore = c, int32(e), s.own
				}
			}
		}
		if top == nil {
			break
		}
		top, topElem = st.lift(top, topElem)
		result = append(result, found{c: top, e: topElem, score: st.stats[top.index][topElem].own})
		st.cover(top, topElem)
	}
	slices.SortStableFunc(result, func(a, b found) int { return cmp.Compare(b.score, a.score) })
	return result
}

// bestExplanations fills best and split, deepest cuboids first.
func (st *state) bestExplanations() {
	lat := st.lat
	nd := len(lat.dims)
	for _, sp := range st.split {
		clear(sp)
	}
	for i := len(lat.cuboids) - 1; i >= 0; i-- {
		c := lat.cuboids[i]
		stats, sp := st.stats[c.index], st.split[c.index]
		for e := range stats {
			s := &stats[e]
			s.best, s.split = max(s.own, 0), -1
			for k := range nd {
				if v := sp[e*nd+k]; v > s.best {
					s.best, s.split = v, int8(k)
				}
			}
		}
		if len(c.dims) == 1 {
			continue
		}
		for _, k := range c.dims {
			parent := lat.byMask[c.mask&^(1<<k)]
			psp := st.split[parent.index]
			for e := range stats {
				if b := stats[e].best; b > 0 {
					pe := parent.leafElem[c.rep[e]]
					psp[int(pe)*nd+k] += b
				}
			}
		}
	}
}

// Lifting. Real causes move their children by different amounts (a failing
// bitrate may add 5 points of failures on one device and 45 on another), and
// a real cause may hold a minor part that does not move at all (a device
// with little traffic that does not use the failing path), so the element
// that explains itself best can be a child of the cause. The cause is the
// most general ancestor whose leaves outside that element depart too (with
// evidence worth naming another element for) and whose children that
// confidently do not depart are only a minor part of it.
const (
	// departureFactor: a child departs unless it departs by less than
	// 1/departureFactor of the element lifted from.
	departureFactor = 5.0
	// normalEvidence is the log-likelihood ratio, in nats, from which a
	// child counts as confidently normal.
	normalEvidence = 4.6 // 100:1
	// minorShare is the largest share of an ancestor's size that its
	// confidently normal children (along any one dimension) may hold.
	minorShare = 0.2
)

// lift returns the most general ancestor of element e of cuboid c (or e)
// that departs beyond e and is mostly departing.
func (st *state) lift(c *cuboid, e int32) (*cuboid, int32) {
	seed := st.stats[c.index][e]
	ref := seed.wd / seed.w * st.sign / departureFactor // > 0
	rep := c.rep[e]
	bestC, bestE := c, e
	for sub := (c.mask - 1) & c.mask; sub > 0; sub = (sub - 1) & c.mask {
		anc := st.lat.byMask[sub]
		a := anc.leafElem[rep]
		as := st.stats[anc.index][a]
		if !as.scored || as.llr-seed.llr < c.penalty || len(anc.dims) > len(bestC.dims) ||
			(len(anc.dims) == len(bestC.dims) && as.own <= st.stats[bestC.index][bestE].own) {
			continue
		}
		if st.normalShare(anc, a, ref) <= minorShare {
			bestC, bestE = anc, a
		}
	}
	return bestC, bestE
}

// normalShare is the largest share of element e of cuboid c's size, along
// any other dimension, held by children that confidently depart by less
// than ref: their evidence for not departing against departing by ref
// exceeds normalEvidence.
func (st *state) normalShare(c *cuboid, e int32, ref float64) float64 {
	total := st.stats[c.index][e].size
	if total <= 0 {
		return 0
	}
	worst := 0.0
	for k := range st.lat.dims {
		child := st.lat.byMask[c.mask|1<<k]
		if c.mask&(1<<k) != 0 || child == nil {
			continue
		}
		st.round++
		normal := 0.0
		for _, li := range c.leavesOf(e) {
			ce := child.leafElem[li]
			if st.stamp[ce] == st.round {
				continue
			}
			st.stamp[ce] = st.round
			cs := st.stats[child.index][ce]
			if cs.w == 0 {
				continue
			}
			if m := cs.wd / cs.w * st.sign; 0.5*cs.w*ref*(ref-2*m) > normalEvidence {
				normal += cs.size
			}
		}
		worst = max(worst, normal/total)
	}
	return worst
}

func (lat *lattice) candidates(found []found, obs *observations) []Candidate {
	var all Amounts
	for li := range lat.leaves {
		all.add(obs, li)
	}
	out := make([]Candidate, 0, len(found))
	for _, f := range found {
		var in Amounts
		var w, wd float64
		for _, li := range f.c.leavesOf(f.e) {
			in.add(obs, int(li))
			w += obs.prec[li]
			wd += obs.prec[li] * obs.dev[li]
		}
		cand := Candidate{
			Element: lat.element(f.c, f.e),
			Score:   f.score,
			Inside:  in,
			Outside: Amounts{Real: all.Real - in.Real, Predict: all.Predict - in.Predict, Total: all.Total - in.Total, Leaves: all.Leaves - in.Leaves},
		}
		if w > 0 {
			cand.Deviation = wd / w
		}
		out = append(out, cand)
	}
	return out
}

func (a *Amounts) add(obs *observations, li int) {
	a.Real += obs.real[li]
	a.Predict += obs.predict[li]
	a.Total += obs.total[li]
	a.Leaves++
}
