package rootcause

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// lattice indexes every element of every cuboid (a set of dimensions) up to
// maxLayer terms: for each cuboid, which of its elements each leaf falls in.
type lattice struct {
	dims    []string
	values  [][]string // values[dim][code]
	codes   []uint32   // codes[leaf*len(dims)+dim]
	leaves  int
	cuboids []*cuboid
	byMask  map[uint32]*cuboid
}

// cuboid is one set of dimensions and its elements (the value combinations
// that occur in the leaves).
type cuboid struct {
	mask  uint32
	dims  []int // ascending
	elems int
	// leafElem[leaf] is the element the leaf falls in.
	leafElem []int32
	// rep[elem] is one leaf of the element, to recover its values.
	rep []int32
	// The leaves of element e are members[start[e]:start[e+1]].
	start, members []int32
	index          int // in lattice.cuboids
	// penalty is the cost in nats of naming one of its elements: which
	// layer, which cuboid of that layer, which value of each dimension.
	penalty float64
}

// maxCuboidWork bounds cuboids × leaves (8 bytes of index each): beyond it
// MaxLayer is lowered.
const maxCuboidWork = 20_000_000

func newLattice(leaves []Leaf, maxLayer int) (*lattice, error) {
	dimIndex := map[string]int{}
	for _, l := range leaves {
		for _, t := range l.Terms {
			if _, ok := dimIndex[t.Dim]; !ok {
				dimIndex[t.Dim] = len(dimIndex)
			}
		}
	}
	if len(dimIndex) == 0 {
		return nil, ErrNoDimensions
	}
	if len(dimIndex) > maxDimensions {
		return nil, fmt.Errorf("rootcause: %d dimensions, at most %d", len(dimIndex), maxDimensions)
	}
	dims := make([]string, 0, len(dimIndex))
	for d := range dimIndex {
		dims = append(dims, d)
	}
	slices.Sort(dims)
	for i, d := range dims {
		dimIndex[d] = i
	}
	lat := &lattice{dims: dims, leaves: len(leaves), values: make([][]string, len(dims)), byMask: map[uint32]*cuboid{}}
	codeOf := make([]map[string]uint32, len(dims))
	for i := range codeOf {
		codeOf[i] = map[string]uint32{}
	}
	lat.codes = make([]uint32, len(leaves)*len(dims))
	seen := make([]int, len(dims)) // the leaf that last set each dimension, +1
	for li, l := range leaves {
		row := lat.codes[li*len(dims) : (li+1)*len(dims)]
		for _, t := range l.Terms {
			k := dimIndex[t.Dim]
			if seen[k] == li+1 {
				return nil, fmt.Errorf("leaf %d: dimension %q twice", li, t.Dim)
			}
			seen[k] = li + 1
			row[k] = lat.code(codeOf, k, t.Value)
		}
		for k := range dims {
			if seen[k] != li+1 {
				row[k] = lat.code(codeOf, k, "")
			}
		}
	}
	for k, vs := range lat.values {
		if len(vs) > maxCardinality {
			return nil, fmt.Errorf("rootcause: dimension %q has %d values, at most %d", dims[k], len(vs), maxCardinality)
		}
	}
	lat.build(effectiveMaxLayer(len(dims), len(leaves), maxLayer))
	return lat, nil
}

func (lat *lattice) code(codeOf []map[string]uint32, dim int, value string) uint32 {
	c, ok := codeOf[dim][value]
	if !ok {
		c = uint32(len(lat.values[dim]))
		codeOf[dim][value] = c
		lat.values[dim] = append(lat.values[dim], value)
	}
	return c
}

func effectiveMaxLayer(dims, leaves, requested int) int {
	layer := requested
	if layer <= 0 {
		layer = dims
		if dims > defaultDeepDims {
			layer = defaultMaxLayer
		}
	}
	layer = min(layer, dims)
	for layer > 1 && cuboidCount(dims, layer)*leaves > maxCuboidWork {
		layer--
	}
	return layer
}

func cuboidCount(dims, maxLayer int) int {
	n := 0
	for k := 1; k <= maxLayer; k++ {
		n += binomial(dims, k)
	}
	return n
}

func binomial(n, k int) int {
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
	}
	return r
}

// build indexes the cuboids layer by layer: an element of a cuboid is one of
// its parent cuboid (the same dimensions but the last) refined by one value.
func (lat *lattice) build(maxLayer int) {
	nd := len(lat.dims)
	masks := []uint32{}
	for m := uint32(1); m < 1<<nd; m++ {
		if bits.OnesCount32(m) <= maxLayer {
			masks = append(masks, m)
		}
	}
	slices.SortFunc(masks, func(a, b uint32) int {
		return bits.OnesCount32(a) - bits.OnesCount32(b)
	})
	for _, m := range masks {
		c := &cuboid{mask: m, leafElem: make([]int32, lat.leaves)}
		for k := range nd {
			if m&(1<<k) != 0 {
				c.dims = append(c.dims, k)
			}
		}
		last := c.dims[len(c.dims)-1]
		parent := lat.byMask[m&^(1<<last)] // nil on layer 1
		card := uint64(len(lat.values[last]))
		parentElems := uint64(1)
		if parent != nil {
			parentElems = uint64(parent.elems)
		}
		var dense []int32
		var sparse map[uint64]int32
		if parentElems*card <= uint64(4*lat.leaves+1024) {
			dense = make([]int32, parentElems*card)
			for i := range dense {
				dense[i] = -1
			}
		} else {
			sparse = map[uint64]int32{}
		}
		for li := range lat.leaves {
			key := uint64(lat.codes[li*nd+last])
			if parent != nil {
				key += uint64(parent.leafElem[li]) * card
			}
			var e int32
			if dense != nil {
				e = dense[key]
				if e < 0 {
					e = int32(c.elems)
					dense[key] = e
				}
			} else {
				var ok bool
				if e, ok = sparse[key]; !ok {
					e = int32(c.elems)
					sparse[key] = e
				}
			}
			if int(e) == c.elems {
				c.elems++
				c.rep = append(c.rep, int32(li))
			}
			c.leafElem[li] = e
		}
		c.index = len(lat.cuboids)
		c.indexMembers()
		c.penalty = math.Log(float64(maxLayer)) + math.Log(float64(binomial(nd, len(c.dims))))
		for _, k := range c.dims {
			c.penalty += math.Log(float64(len(lat.values[k])))
		}
		lat.cuboids = append(lat.cuboids, c)
		lat.byMask[m] = c
	}
}

// indexMembers lists the leaves of each element (a counting sort).
func (c *cuboid) indexMembers() {
	c.start = make([]int32, c.elems+1)
	for _, e := range c.leafElem {
		c.start[e+1]++
	}
	for e := range c.elems {
		c.start[e+1] += c.start[e]
	}
	next := slices.Clone(c.start[:c.elems])
	c.members = make([]int32, len(c.leafElem))
	for li, e := range c.leafElem {
		c.members[next[e]] = int32(li)
		next[e]++
	}
}

// leavesOf is the leaves of element e.
func (c *cuboid) leavesOf(e int32) []int32 { return c.members[c.start[e]:c.start[e+1]] }

// element returns the terms of element e of cuboid c.
func (lat *lattice) element(c *cuboid, e int32) Element {
	nd := len(lat.dims)
	leaf := int(c.rep[e])
	el := make(Element, len(c.dims))
	for i, k := range c.dims {
		el[i] = Term{Dim: lat.dims[k], Value: lat.values[k][lat.codes[leaf*nd+k]]}
	}
	return el
}
