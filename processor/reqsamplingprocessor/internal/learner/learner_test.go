package learner

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Unix(1715234890, 0)

func testConfig() Config {
	return Config{HalfLife: time.Hour, MinFailures: 3, MinFailureRate: 0.2, PrefixLength: 2, MaxHashes: 100}
}

type recorder struct {
	evicted int
	hot     []string
}

func newLearner(cfg Config) (*Learner, *recorder) {
	r := &recorder{}
	return New(cfg, func() { r.evicted++ }, func(key string, bucket bool, _ Stats) {
		if bucket {
			key = "bucket:" + key
		}
		r.hot = append(r.hot, key)
	}), r
}

func observe(l *Learner, hash string, requests, failures int, at time.Time) {
	for i := range requests {
		l.Observe(hash, i < failures, at)
	}
}

func TestHashBecomesHotAtBothThresholds(t *testing.T) {
	l, rec := newLearner(testConfig())
	observe(l, "a1b2c3d4", 2, 2, t0)
	assert.False(t, l.Hot("a1b2c3d4", t0), "2 failures are below min_failures")
	observe(l, "a1b2c3d4", 1, 1, t0)
	assert.True(t, l.Hot("a1b2c3d4", t0))
	assert.Equal(t, []string{"a1b2c3d4", "bucket:a1"}, rec.hot)

	// Many failures at a low rate are not hot: a busy healthy input with a few errors.
	observe(l, "b0000000", 90, 0, t0)
	observe(l, "b0000000", 10, 10, t0)
	assert.False(t, l.Hot("b0000000", t0))
}

func TestChanceFailuresAreNotHot(t *testing.T) {
	l, _ := newLearner(testConfig())
	// 3 failures in 12 requests happens by chance where 8% of requests fail.
	observe(l, "5a5a5a5a", 9, 0, t0)
	observe(l, "5a5a5a5a", 3, 3, t0)
	assert.False(t, l.Hot("5a5a5a5a", t0))
	assert.InDelta(t, 0.105, Stats{Requests: 12, Failures: 3}.LowerRate(), 0.001)
	assert.InDelta(t, 0.526, Stats{Requests: 3, Failures: 3}.LowerRate(), 0.001)
	assert.Zero(t, Stats{}.LowerRate())
}

func TestFailuresSpreadOverTimeStillCount(t *testing.T) {
	l, _ := newLearner(testConfig())
	for i := range 3 {
		l.Observe("a1b2c3d4", true, t0.Add(time.Duration(i)*time.Minute))
	}
	assert.True(t, l.Hot("a1b2c3d4", t0.Add(2*time.Minute)), "three failures in three minutes")
}

func TestHotStaysWhileFailingAndCoolsWhenItStops(t *testing.T) {
	l, _ := newLearner(testConfig())
	observe(l, "c0ffee00", 10, 10, t0)
	require.True(t, l.Hot("c0ffee00", t0))
	observe(l, "c0ffee00", 50, 0, t0) // 10 of 60: about 10% with confidence
	assert.True(t, l.Hot("c0ffee00", t0), "hysteresis: above half the entry rate")
	observe(l, "fresh000", 50, 0, t0)
	observe(l, "fresh000", 10, 10, t0)
	assert.False(t, l.Hot("fresh000", t0), "the same counts do not make a cold hash hot")
	observe(l, "c0ffee00", 20, 0, t0) // 10 of 80
	assert.False(t, l.Hot("c0ffee00", t0), "cooled: below half the entry rate")

	// A hash that stops getting requests cools as its failures decay away.
	observe(l, "d00d0000", 4, 4, t0)
	require.True(t, l.Hot("d00d0000", t0))
	assert.True(t, l.Hot("d00d0000", t0.Add(time.Hour)), "2 failures left: still ≥ half of min_failures")
	assert.True(t, l.Hot("d00d0000", t0.Add(2*time.Hour)), "1 failure left: rounds to 1.5")
	assert.False(t, l.Hot("d00d0000", t0.Add(3*time.Hour)), "half a failure left")
}

func TestUnknownHashTakesItsBucketsHeat(t *testing.T) {
	l, _ := newLearner(testConfig())
	// A family of inputs under one prefix, each seen once or twice, all failing.
	for _, h := range []string{"0a000001", "0a000002", "0a000003", "0a000004"} {
		observe(l, h, 1, 1, t0)
	}
	assert.True(t, l.Hot("0a999999", t0), "a new member of a hot bucket is hot from its first request")
	assert.False(t, l.Hot("0b999999", t0), "other buckets are not")

	// A healthy input in the same bucket, seen often enough, is judged on its own.
	observe(l, "0a123456", 14, 0, t0)
	assert.True(t, l.Hot("0a123456", t0), "14 requests: not known yet")
	observe(l, "0a123456", 1, 0, t0)
	assert.False(t, l.Hot("0a123456", t0), "15 healthy requests (min_failures ÷ min_failure_rate): known good")
}

func TestBoundedHashes(t *testing.T) {
	cfg := testConfig()
	cfg.MaxHashes = 2
	l, rec := newLearner(cfg)
	observe(l, "11111111", 3, 3, t0)
	observe(l, "22222222", 1, 0, t0)
	observe(l, "33333333", 1, 0, t0) // evicts 11111111, the least recently seen
	assert.Equal(t, 1, rec.evicted)
	snap := l.Snapshot(t0)
	assert.Equal(t, 2, snap.Hashes)
	assert.Empty(t, snap.HotHashes, "an evicted hot hash leaves the hot list")

	long := strings.Repeat("f", maxHashLen+1)
	l.Observe(long, true, t0)
	assert.Equal(t, 2, l.Snapshot(t0).Hashes, "values longer than any hash are not learned")
}

func TestBuckets(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		cfg := testConfig()
		cfg.PrefixLength = n
		l, _ := newLearner(cfg)
		b, ok := l.Bucket("f7a1b2c3")
		assert.True(t, ok)
		assert.Equal(t, "f7a"[:n], b)
	}
	l, _ := newLearner(testConfig())
	for _, bad := range []string{"", "f", "F7000000", "zz000000", "-1"} {
		_, ok := l.Bucket(bad)
		assert.False(t, ok, bad)
		l.Observe(bad, true, t0) // never panics
		assert.False(t, l.Hot(bad, t0))
	}
}

func TestSnapshot(t *testing.T) {
	l, _ := newLearner(testConfig())
	observe(l, "f7000001", 10, 9, t0)
	observe(l, "f7000002", 4, 4, t0)
	observe(l, "12345678", 10, 0, t0)
	snap := l.Snapshot(t0)
	require.Len(t, snap.HotHashes, 2)
	assert.Equal(t, "f7000001", snap.HotHashes[0].InputHash, "most failures first")
	assert.InDelta(t, 0.9, snap.HotHashes[0].Rate(), 1e-9)
	require.Len(t, snap.Buckets, 2)
	assert.Equal(t, Bucket{Prefix: "12", Stats: Stats{Requests: 10}}, snap.Buckets[0])
	assert.Equal(t, "f7", snap.Buckets[1].Prefix)
	assert.True(t, snap.Buckets[1].Hot)

	later := l.Snapshot(t0.Add(time.Hour))
	assert.InDelta(t, 5, later.Buckets[0].Requests, 1e-9, "counts halve every half-life")
}

func TestFailureLearnedAfterTheRequest(t *testing.T) {
	l, _ := newLearner(testConfig())
	for range 3 {
		l.Observe("abcabc00", false, t0)
		l.ObserveFailure("abcabc00", t0) // its ERROR line came in a later batch
	}
	assert.True(t, l.Hot("abcabc00", t0))
	assert.Equal(t, Stats{Requests: 3, Failures: 3}, l.Snapshot(t0).HotHashes[0].Stats)
}
