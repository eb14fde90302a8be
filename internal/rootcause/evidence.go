package rootcause

import "math"

// observations are the leaves seen through the noise model. Each leaf's
// departure is its deviation d = (real-predict)/scale and its precision
// w = 1/Var(d) under normal behaviour. The scale is the leaf's Total where
// it has one (d is then a rate difference: 2% failing where 1% was
// expected is +0.01), else max(real, predict) (d is a relative deviation in
// [-1, 1], which treats a drop to half and a rise to double alike). A leaf
// with w = 0 (nothing observed, nothing expected) carries no evidence.
type observations struct {
	real, predict, total []float64
	dev, prec            []float64
	// rate is Predict/Total for a leaf with a Total, whose evidence is
	// binomial: Real events out of Total at that rate, or at the rate of a
	// root cause. -1 for a leaf without, whose evidence is Gaussian in d.
	rate []float64
	// dispersion is how much more a binomial leaf scatters than binomial
	// counts: its Sigma² over Total·rate·(1-rate).
	dispersion []float64
	// size is a leaf's share of the data: Total where it has one, else
	// max(real, predict).
	size []float64
	// sign is the direction root causes depart in, +1 (more than expected)
	// or -1; 0 before it is known.
	sign float64
}

// minRelVar floors the relative variance, so that a perfect forecast does
// not make every rounding error infinitely significant.
const minRelVar = 1e-6

// observe sees the leaves through a noise model fitted on the leaves that
// depart against sign (all of them for sign 0).
func observe(leaves []Leaf, sign float64) *observations {
	n := len(leaves)
	obs := &observations{
		real: make([]float64, n), predict: make([]float64, n), total: make([]float64, n),
		dev: make([]float64, n), prec: make([]float64, n), rate: make([]float64, n), dispersion: make([]float64, n),
		size: make([]float64, n), sign: sign,
	}
	model := fitNoise(leaves, sign)
	for i, l := range leaves {
		obs.real[i], obs.predict[i], obs.total[i] = l.Real, l.Predict, l.Total
		obs.rate[i] = -1
		m := magnitude(l)
		obs.size[i] = m
		if l.Total > 0 {
			obs.size[i] = l.Total
		}
		if m <= 0 {
			continue // no evidence
		}
		if l.Total > 0 {
			p := min(max(l.Predict/l.Total, minRate), 1-minRate)
			variance := l.Total * p * (1 - p)
			obs.rate[i], obs.dispersion[i] = p, 1
			if l.Sigma > 0 {
				obs.dispersion[i] = max(l.Sigma*l.Sigma/variance, minDispersion)
				variance = l.Sigma * l.Sigma
			}
			obs.dev[i] = (l.Real - l.Predict) / l.Total
			obs.prec[i] = l.Total * l.Total / variance
			continue
		}
		variance := max(model.relVar(m), minRelVar) * m * m
		if l.Sigma > 0 {
			variance = max(l.Sigma*l.Sigma, minRelVar*m*m)
		}
		obs.dev[i] = (l.Real - l.Predict) / m
		obs.prec[i] = m * m / variance
	}
	return obs
}

const (
	minRate       = 1e-9
	minDispersion = 1e-3
)

// spreadTolerance is how much the leaves of one root cause may differ in
// their deviation, relative to the element's typical deviation mu: each
// leaf departs by its own amount, drawn around mu with a spread of
// spreadTolerance·|mu|. A failure rate that rises by 15 points in one leaf
// and by 20 in another is one cause: without the spread the strongest
// causes would be split into children that merely differ in degree, while
// what should split a parent is children that do not depart.
const spreadTolerance = 0.3

// leafLLR is the log-likelihood ratio of leaf li departing by about mu
// (its own departure integrated over the spread around mu) against not
// departing.
func (obs *observations) leafLLR(li int, mu float64) float64 {
	tau := spreadTolerance * mu
	tau2 := tau * tau
	if p := obs.rate[li]; p >= 0 {
		return obs.binomialLLR(li, p, mu, tau2)
	}
	// Gaussian: d ~ N(0, 1/w) against N(mu, 1/w + τ²), exactly.
	d, w := obs.dev[li], obs.prec[li]
	r := d - mu
	v := 1/w + tau2
	return 0.5 * (w*d*d - r*r/v - math.Log(v*w))
}

// binomialLLR is leafLLR for real events out of total at rate p against
// rate q ~ N(p+mu, τ²), by Laplace's approximation around the best q, found
// by one Newton step from p+mu; each log-likelihood divided by the leaf's
// dispersion (a quasi-likelihood).
func (obs *observations) binomialLLR(li int, p, mu, tau2 float64) float64 {
	total := obs.total[li]
	v := min(max(obs.real[li], 0), total)
	phi := obs.dispersion[li]
	loglik := func(q float64) float64 { return (xlogy(v, q) + xlogy(total-v, 1-q)) / phi }
	m := clampRate(p + mu)
	if tau2 == 0 {
		return loglik(m) - loglik(p)
	}
	grad := (v/m - (total-v)/(1-m)) / phi
	info := func(q float64) float64 { return (v/(q*q) + (total-v)/((1-q)*(1-q))) / phi }
	q := clampRate(m + grad/(info(m)+1/tau2))
	return loglik(q) - 0.5*(q-m)*(q-m)/tau2 - 0.5*math.Log1p(tau2*info(q)) - loglik(p)
}

func clampRate(q float64) float64 { return min(max(q, minRate), 1-minRate) }

// xlogy is x·log(y), 0 at x = 0.
func xlogy(x, y float64) float64 {
	if x == 0 {
		return 0
	}
	return x * math.Log(y)
}

func magnitude(l Leaf) float64 { return max(l.Real, l.Predict, 0) }
