package policy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/learner"
)

func TestHotInput(t *testing.T) {
	l := learner.New(learner.Config{HalfLife: time.Hour, MinFailures: 2, MinFailureRate: 0.3, PrefixLength: 2, MaxHashes: 10},
		func() {}, func(string, bool, learner.Stats) {})
	p := NewHotInput(l)
	req := &Request{InputHash: "f7a1b2c3", Now: t0}
	assert.False(t, p.MatchRequest(req, false))
	l.Observe("f7a1b2c3", true, t0)
	l.Observe("f7a1b2c3", true, t0)
	assert.True(t, p.MatchRequest(req, false))
	assert.True(t, p.MatchRequest(&Request{InputHash: "f7000000", Now: t0}, false), "same bucket, never seen")
	assert.False(t, p.MatchRequest(&Request{Now: t0}, false), "no input_hash")
	assert.False(t, p.MatchRecord(&Record{}))
}
