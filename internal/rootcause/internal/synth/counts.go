package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/loom-otel/loom/internal/rootcause"
)

// Shape forces the layout of a counts case's root causes.
type Shape int

const (
	// AnyShape: 1-3 elements on layers 1-3.
	AnyShape Shape = iota
	// SingleLeaf: one leaf (an element on every dimension).
	SingleLeaf
	// TwoLayers: two elements on different layers.
	TwoLayers
)

// CountsConfig are the knobs of a counts case: request traffic spread over
// the leaves, a baseline failure rate, and a failure-rate jump on the root
// causes at one minute.
type CountsConfig struct {
	Dims        IntRange // how many dimensions
	Cardinality IntRange // values per dimension
	Occupancy   Range    // fraction of the value combinations that see traffic
	Minutes     IntRange // baseline minutes before the anomaly
	Traffic     Range    // requests per minute, all leaves (drawn log-uniform)
	BaseRate    Range    // failure rate of normal traffic (log-uniform)
	RateSpread  float64  // leaves' rates differ by exp(N(0, RateSpread))
	Jitter      float64  // each minute's rate by exp(N(0, Jitter))
	Jump        Range    // the root causes' rate rises to p + Jump·(1-p)
	Shape       Shape
}

// maxCombinations bounds the leaves of a counts case, as a few discovered
// dimensions of request data would.
const maxCombinations = 4000

// minExtraFailures is how many more failures a root cause must bring in its
// minute: fewer cannot be told from chance.
const minExtraFailures = 10

// Requests is a counts setting like request data: a few dimensions of
// uneven traffic, 1-5% failing, and a root cause failing 5-50% more.
func Requests() CountsConfig {
	return CountsConfig{
		Dims: IntRange{3, 5}, Cardinality: IntRange{2, 12}, Occupancy: Range{0.4, 1},
		Minutes: IntRange{10, 60}, Traffic: Range{2000, 100000}, BaseRate: Range{0.005, 0.05},
		RateSpread: 0.3, Jitter: 0.1, Jump: Range{0.05, 0.5},
	}
}

// Counts draws one counts case. Dimension names and values are random
// words, so nothing can depend on them.
func Counts(rng *rand.Rand, cfg CountsConfig) Case {
	nd := cfg.Dims.draw(rng)
	if cfg.Shape == TwoLayers {
		nd = max(nd, 2)
	}
	names := make([]string, nd)
	values := make([][]string, nd)
	combinations := 1
	for k := range nd {
		names[k] = word(rng, k)
		card := cfg.Cardinality.draw(rng)
		for combinations*card > maxCombinations && card > 2 {
			card--
		}
		combinations *= card
		values[k] = make([]string, card)
		for v := range values[k] {
			values[k][v] = fmt.Sprintf("%s%d", word(rng, v), v)
		}
	}
	// The observed combinations and their share of the traffic.
	type leaf struct {
		codes   []int
		traffic float64 // requests per minute
		rate    float64
	}
	occupancy := cfg.Occupancy.draw(rng)
	total := logUniform(rng, cfg.Traffic)
	base := logUniform(rng, cfg.BaseRate)
	var leaves []leaf
	var weights float64
	forEachCombination(values, func(codes []int) {
		if rng.Float64() > occupancy {
			return
		}
		w := math.Exp(rng.NormFloat64() * 1.2)
		weights += w
		leaves = append(leaves, leaf{codes: slices.Clone(codes), traffic: w, rate: min(base*math.Exp(rng.NormFloat64()*cfg.RateSpread), 0.5)})
	})
	if len(leaves) == 0 {
		return Counts(rng, cfg)
	}
	for i := range leaves {
		leaves[i].traffic *= total / weights
	}

	jump := cfg.Jump.draw(rng)
	elements := pickElements(rng, cfg.Shape, nd, func(dims []int) []int {
		// An element where the jump adds enough failures to be seen (the
		// busiest of many tries where none does): that of a random leaf,
		// drawn by traffic.
		var best []int
		bestTraffic := -1.0
		for range 200 {
			l := leaves[busyLeaf(rng, len(leaves), func(i int) float64 { return leaves[i].traffic })]
			el := make([]int, len(dims))
			for j, k := range dims {
				el[j] = l.codes[k]
			}
			traffic := 0.0
			for _, o := range leaves {
				if matches(o.codes, dims, el) {
					traffic += o.traffic
				}
			}
			if traffic > bestTraffic {
				best, bestTraffic = el, traffic
			}
			if traffic*jump >= minExtraFailures {
				break
			}
		}
		return best
	})
	inside := func(codes []int) bool {
		return slices.ContainsFunc(elements, func(a anomaly) bool { return matches(codes, a.dims, a.elements[0]) })
	}
	minutes := cfg.Minutes.draw(rng)
	start := int64(1_700_000_000 - 1_700_000_000%60)
	at := start + int64(minutes)*60
	var rows []rootcause.CountRow
	for m := 0; m <= minutes+2; m++ { // two minutes after the anomaly too
		minute := start + int64(m)*60
		busy := 1 + 0.1*rng.NormFloat64()
		for _, l := range leaves {
			cnt := poisson(rng, l.traffic*busy)
			if cnt == 0 {
				continue
			}
			p := min(l.rate*math.Exp(rng.NormFloat64()*cfg.Jitter), 1)
			if minute == at && inside(l.codes) {
				p += jump * (1 - p)
			}
			terms := make([]rootcause.Term, nd)
			for k := range nd {
				terms[k] = rootcause.Term{Dim: names[k], Value: values[k][l.codes[k]]}
			}
			rows = append(rows, rootcause.CountRow{Minute: minute, Terms: terms, Value: float64(binomial(rng, cnt, p)), Count: float64(cnt)})
		}
	}
	var labels []string
	for _, el := range elements {
		terms := make([]string, len(el.dims))
		for j, k := range el.dims {
			terms[j] = names[k] + "=" + values[k][el.elements[0][j]]
		}
		slices.Sort(terms)
		labels = append(labels, strings.Join(terms, "&"))
	}
	slices.Sort(labels)
	return Case{Rows: rows, At: at, Truth: strings.Join(slices.Compact(labels), ";")}
}

// pickElements places the root causes as one-element anomalies that share
// no value on a shared dimension (so none contains another).
func pickElements(rng *rand.Rand, shape Shape, nd int, pick func(dims []int) []int) []anomaly {
	var layers []int
	switch shape {
	case SingleLeaf:
		layers = []int{nd}
	case TwoLayers:
		first := 1 + rng.IntN(min(nd, 3))
		second := 1 + rng.IntN(min(nd, 3)-1)
		if second >= first {
			second++
		}
		layers = []int{first, second}
	default:
		for range 1 + rng.IntN(3) {
			layers = append(layers, 1+rng.IntN(min(nd, 3)))
		}
	}
	var out []anomaly
	for _, layer := range layers {
		for range 100 {
			dims := rng.Perm(nd)[:layer]
			slices.Sort(dims)
			el := pick(dims)
			clash := slices.ContainsFunc(out, func(a anomaly) bool {
				for j, k := range dims {
					if i := slices.Index(a.dims, k); i >= 0 && a.elements[0][i] == el[j] {
						return true
					}
				}
				return false
			})
			if !clash {
				out = append(out, anomaly{dims: dims, elements: [][]int{el}})
				break
			}
		}
	}
	return out
}

// matches tells whether a leaf's codes have the element's values on dims.
func matches(codes, dims, element []int) bool {
	for j, k := range dims {
		if codes[k] != element[j] {
			return false
		}
	}
	return true
}

// busyLeaf draws a leaf with probability proportional to its traffic.
func busyLeaf(rng *rand.Rand, n int, traffic func(int) float64) int {
	total := 0.0
	for i := range n {
		total += traffic(i)
	}
	x := rng.Float64() * total
	for i := range n {
		if x -= traffic(i); x <= 0 {
			return i
		}
	}
	return n - 1
}

func forEachCombination(values [][]string, fn func([]int)) {
	codes := make([]int, len(values))
	for {
		fn(codes)
		k := len(codes) - 1
		for k >= 0 {
			codes[k]++
			if codes[k] < len(values[k]) {
				break
			}
			codes[k] = 0
			k--
		}
		if k < 0 {
			return
		}
	}
}

var syllables = []string{"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu", "po", "da"}

func word(rng *rand.Rand, salt int) string {
	var b strings.Builder
	for range 2 + rng.IntN(2) {
		b.WriteString(syllables[rng.IntN(len(syllables))])
	}
	fmt.Fprintf(&b, "%c", 'a'+salt%26)
	return b.String()
}

func logUniform(rng *rand.Rand, r Range) float64 {
	return math.Exp(math.Log(r[0]) + rng.Float64()*(math.Log(r[1])-math.Log(r[0])))
}

// poisson draws a Poisson count (normal approximation for large means).
func poisson(rng *rand.Rand, mean float64) int {
	if mean > 50 {
		return max(0, int(math.Round(mean+math.Sqrt(mean)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// binomial draws a binomial count (normal approximation for large counts,
// Poisson for rare events).
func binomial(rng *rand.Rand, n int, p float64) int {
	if p < 0.05 && float64(n)*p*(1-p) <= 25 {
		return min(n, poisson(rng, float64(n)*p))
	}
	if float64(n)*p*(1-p) > 25 {
		return min(n, max(0, int(math.Round(float64(n)*p+math.Sqrt(float64(n)*p*(1-p))*rng.NormFloat64()))))
	}
	k := 0
	for range n {
		if rng.Float64() < p {
			k++
		}
	}
	return k
}
