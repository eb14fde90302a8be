package rootcause

import (
	"cmp"
	"math"
	"slices"
)

// noiseModel is Var((real-predict)/m) = rel + abs/m for a leaf of magnitude
// m = max(real, predict): relative noise (a forecast off by some percent)
// plus counting noise (Poisson-like, whose relative variance shrinks as 1/m).
// It serves leaves without a Sigma.
type noiseModel struct{ rel, abs float64 }

func (nm noiseModel) relVar(m float64) float64 { return nm.rel + nm.abs/m }

// fitNoise estimates the noise of normal leaves from the leaves that depart
// against sign: root causes all depart with it, so these are normal, and
// normal noise is symmetric. Leaves are binned by magnitude; each bin's
// spread is the robust one of its median |real-predict|/m.
func fitNoise(leaves []Leaf, sign float64) noiseModel {
	type point struct{ m, absDev float64 }
	var pts []point
	for _, l := range leaves {
		m := magnitude(l)
		if l.Sigma > 0 || m <= 0 || (sign != 0 && (l.Real-l.Predict)*sign >= 0) {
			continue
		}
		pts = append(pts, point{m, math.Abs(l.Real-l.Predict) / m})
	}
	if len(pts) < minNoisePoints {
		// Too few leaves against the direction: use every leaf, and let
		// root causes inflate the estimate (conservative).
		pts = pts[:0]
		for _, l := range leaves {
			if m := magnitude(l); m > 0 && l.Sigma == 0 {
				pts = append(pts, point{m, math.Abs(l.Real-l.Predict) / m})
			}
		}
	}
	if len(pts) == 0 {
		return noiseModel{rel: minRelVar}
	}
	slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.m, b.m) })
	bins := max(1, min(noiseBins, len(pts)/minNoisePoints))
	var xs, ys, ws []float64
	devs := make([]float64, 0, len(pts)/bins+1)
	for b := range bins {
		lo, hi := b*len(pts)/bins, (b+1)*len(pts)/bins
		devs = devs[:0]
		for _, p := range pts[lo:hi] {
			devs = append(devs, p.absDev)
		}
		spread := median(devs) / halfNormalMedian
		xs = append(xs, 1/pts[(lo+hi)/2].m)
		ys = append(ys, spread*spread)
		ws = append(ws, float64(hi-lo))
	}
	return fitNonNegative(xs, ys, ws)
}

const (
	noiseBins        = 16
	minNoisePoints   = 20
	halfNormalMedian = 0.6744897501960817 // median of |N(0,1)|
)

// fitNonNegative fits y = rel + abs*x by weighted least squares with both
// coefficients >= 0.
func fitNonNegative(xs, ys, ws []float64) noiseModel {
	var sw, sx, sy, sxx, sxy float64
	for i := range xs {
		w := ws[i]
		sw += w
		sx += w * xs[i]
		sy += w * ys[i]
		sxx += w * xs[i] * xs[i]
		sxy += w * xs[i] * ys[i]
	}
	det := sw*sxx - sx*sx
	if det > 0 {
		abs := (sw*sxy - sx*sy) / det
		rel := (sy - abs*sx) / sw
		if abs >= 0 && rel >= 0 {
			return noiseModel{rel: rel, abs: abs}
		}
	}
	// One coefficient at zero: the better of the two one-term fits.
	relOnly := noiseModel{rel: sy / sw}
	absOnly := noiseModel{}
	if sxx > 0 {
		absOnly.abs = max(sxy/sxx, 0)
	}
	sse := func(nm noiseModel) float64 {
		s := 0.0
		for i := range xs {
			r := ys[i] - nm.rel - nm.abs*xs[i]
			s += ws[i] * r * r
		}
		return s
	}
	if sse(absOnly) < sse(relOnly) {
		return absOnly
	}
	return relOnly
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
