package reqsamplingprocessor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/policy"
)

// The draw must never change between versions: instances of two releases
// behind one load balancer have to agree on every request.
func TestUnitHashIsStable(t *testing.T) {
	assert.InDelta(t, 0.3049957497, unitHash(requestKey{reqID: "req-1715234890123-a1b2c3"}, 0), 1e-9)
	assert.InDelta(t, 0.0752080591, unitHash(requestKey{reqID: "req-1715234890123-a1b2c3"}, 42), 1e-9)
	assert.InDelta(t, 0.2538796775, unitHash(requestKey{traceID: [16]byte{1, 2, 3}}, 0), 1e-9)
}

func TestUnitHashIsUniform(t *testing.T) {
	const n = 100_000
	var buckets [10]int
	for i := range n {
		buckets[int(10*unitHash(requestKey{reqID: fmt.Sprintf("req-%013d-abcdef", i)}, 0))]++
	}
	for i, c := range buckets {
		assert.InDelta(t, n/10, c, n/100, "decile %d", i)
	}
}

type matchAll struct{}

func (matchAll) MatchRecord(*policy.Record) bool                   { return true }
func (matchAll) MatchRequest(_ *policy.Request, matched bool) bool { return matched }

func TestDecideCreditsTheFirstMostLikelyPolicy(t *testing.T) {
	d := decider{base: 0.01, policies: []compiledPolicy{
		{name: "tenth", probability: 0.1, eval: matchAll{}},
		{name: "all", probability: 1, eval: matchAll{}},
		{name: "all_too", probability: 1, eval: matchAll{}},
	}}
	req := &policy.Request{}
	for hits, want := range map[uint64]verdict{
		0b000: {policy: -1, probability: 0.01},
		0b001: {policy: 0, probability: 0.1},
		0b111: {policy: 1, probability: 1, kept: true},
		0b100: {policy: 2, probability: 1, kept: true},
	} {
		assert.Equal(t, want, d.decide(req, hits, 0.5), "hits %03b", hits)
	}
	assert.True(t, d.decide(req, 0, 0.009).kept, "a draw below the base rate keeps")
	assert.Equal(t, 100.0, verdict{probability: 0.01}.adjustedCount())

	d.base = 1
	assert.Equal(t, verdict{policy: 1, probability: 1, kept: true}, d.decide(req, 0b010, 0.99), "as likely as the base rate: the policy takes the credit")
}
