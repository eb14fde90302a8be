package reqsamplingprocessor

import (
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/policy"
)

// verdict is the fate of a request, shared by all of its records.
type verdict struct {
	kept bool
	// policy is the index of the policy that set the probability; -1 for the base rate.
	policy int
	// probability with which the request was kept.
	probability float64
	// failure is the failure model's verdict when the request failed; nil when it did not.
	failure *failure.Verdict
	// handedOver: the gateway that owns the request took its records here
	// (handover); they are neither kept nor dropped by this one.
	handedOver bool
}

// adjustedCount is how many requests a kept one stands for.
func (v verdict) adjustedCount() float64 { return 1 / v.probability }

// decider applies the policies to a request.
type decider struct {
	policies []compiledPolicy
	base     float64 // base probability
	seed     uint64
}

// decide keeps the request with the highest probability among the base rate
// and the policies it matches, credited to the first policy with it (a
// policy as likely as the base rate takes the credit). draw
// is uniform in [0, 1): for a request the hash of its key, so that every
// instance and both signals draw the same.
//
// Every failure policy is asked, so that the verdict carries all the reasons
// the failure model finds (req.Findings); the other policies only while they
// could raise the probability.
func (d *decider) decide(req *policy.Request, hits uint64, draw float64) verdict {
	v := verdict{policy: -1, probability: d.base}
	failed := false
	for i := range d.policies {
		p := &d.policies[i]
		better := p.probability > v.probability || v.policy < 0 && p.probability == v.probability
		if !better && !p.failure {
			continue
		}
		if p.eval.MatchRequest(req, hits&(1<<i) != 0) {
			failed = failed || p.failure
			if better {
				v.policy, v.probability = i, p.probability
			}
		}
	}
	if failed {
		verdict := req.Findings.Verdict
		verdict.Failed = true
		verdict.Reasons = append([]failure.Reason(nil), verdict.Reasons...)
		v.failure = &verdict
	}
	v.kept = draw < v.probability
	return v
}

// baseVerdict is the decision at the base rate alone.
func (d *decider) baseVerdict(draw float64) verdict {
	return verdict{policy: -1, probability: d.base, kept: draw < d.base}
}

// volumeGuard follows the share of recent requests that policies which do
// not report failures kept beyond the base rate.
type volumeGuard struct {
	maxShare float64
	share    float64 // decayed over about guardMemory decisions
}

const guardMemory = 1000

// admit says whether v, credited to a policy that reports no failure, may
// keep its probability; it is then counted in the share.
func (g *volumeGuard) admit(v verdict) bool {
	byPolicy := v.policy >= 0 && v.failure == nil
	if byPolicy && g.maxShare > 0 && g.share >= g.maxShare {
		g.observe(false)
		return false
	}
	g.observe(byPolicy && v.kept)
	return true
}

func (g *volumeGuard) observe(kept bool) {
	k := 0.0
	if kept {
		k = 1
	}
	g.share += (k - g.share) / guardMemory
}

// failed reports whether a failure policy matched any record.
func (d *decider) failed(hits uint64) bool {
	for i := range d.policies {
		if d.policies[i].failure && hits&(1<<i) != 0 {
			return true
		}
	}
	return false
}

func (d *decider) policyName(v verdict) string {
	if v.policy < 0 {
		return basePolicy
	}
	return d.policies[v.policy].name
}

// unitHash maps a request key to [0, 1): FNV-1a over the req_id (or the
// trace id), seeded, then mixed so that every bit counts.
func unitHash(key requestKey, seed uint64) float64 { return unit(mix(keyHash(key, seed))) }

// keyHash is FNV-1a over the req_id (or the trace id), seeded.
func keyHash(key requestKey, seed uint64) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037) ^ seed
	if key.reqID != "" {
		for i := 0; i < len(key.reqID); i++ {
			h = (h ^ uint64(key.reqID[i])) * prime
		}
	} else {
		for _, c := range key.traceID {
			h = (h ^ uint64(c)) * prime
		}
	}
	return h
}

// mix is the splitmix64 finalizer.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }
