package learner

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// share hands each learner's deltas to the others.
func share(t *testing.T, now time.Time, learners ...*Learner) {
	t.Helper()
	for i, from := range learners {
		deltas, dropped := from.TakeDeltas()
		require.Zero(t, dropped)
		for j, to := range learners {
			if i != j {
				for _, d := range deltas {
					require.NoError(t, to.Merge(d, now))
				}
			}
		}
	}
}

func TestSharedHalvesLearnAsOne(t *testing.T) {
	cfg := testConfig()
	cfg.Outbox = 100
	whole, _ := newLearner(cfg)
	a, recA := newLearner(cfg)
	b, _ := newLearner(cfg)
	// A failing input's requests split between two instances: each sees 2
	// of its 4 failures, under min_failures, until they share.
	for i := range 8 {
		at := t0.Add(time.Duration(i) * time.Second)
		whole.Observe("a1b2c3d4", i%2 == 0, at)
		half := a
		if i%4 >= 2 {
			half = b
		}
		half.Observe("a1b2c3d4", i%2 == 0, at)
	}
	at := t0.Add(8 * time.Second)
	assert.True(t, whole.Hot("a1b2c3d4", at))
	assert.False(t, a.Hot("a1b2c3d4", at), "2 failures of its own are below min_failures")
	share(t, at, a, b)
	for _, l := range []*Learner{a, b} {
		assert.True(t, l.Hot("a1b2c3d4", at))
		assert.InDelta(t, whole.Snapshot(at).HotHashes[0].Requests, l.Snapshot(at).HotHashes[0].Requests, 0.01)
	}
	assert.Contains(t, recA.hot, "a1b2c3d4", "becoming hot by a peer's counts is told as by one's own")
	deltas, _ := a.TakeDeltas()
	assert.Empty(t, deltas, "what came from a peer is not sent on")
}

func TestSharedOutboxIsBounded(t *testing.T) {
	cfg := testConfig()
	cfg.Outbox = 2
	l, _ := newLearner(cfg)
	for _, h := range []string{"aa", "bb", "aa", "cc", "dd"} {
		l.Observe(h, false, t0)
	}
	deltas, dropped := l.TakeDeltas()
	assert.ElementsMatch(t, []InputDelta{{Hash: "aa", Requests: 2}, {Hash: "bb", Requests: 1}}, deltas)
	assert.Equal(t, 2, dropped)

	cfg.Outbox = 0
	quiet, _ := newLearner(cfg)
	quiet.Observe("aa", true, t0)
	deltas, dropped = quiet.TakeDeltas()
	assert.Empty(t, deltas, "not shared")
	assert.Zero(t, dropped)
}

func TestMergeRefusesWhatIsNotACount(t *testing.T) {
	l, _ := newLearner(testConfig())
	for _, d := range []InputDelta{
		{Hash: "", Requests: 1},
		{Hash: string(make([]byte, maxHashLen+1)), Requests: 1},
		{Hash: "aa", Requests: -1},
		{Hash: "aa", Failures: math.NaN()},
		{Hash: "aa", Requests: math.Inf(1)},
		{Hash: "aa"},
	} {
		assert.ErrorIs(t, l.Merge(d, t0), errDelta, "%+v", d)
	}
	assert.Zero(t, l.Snapshot(t0).Hashes)
}
