package reqsamplingprocessor

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFIFOKeepsOrderAndReusesSpace(t *testing.T) {
	var q fifo[int]
	next, want := 0, 0
	for round := range 50 {
		for range 100 {
			q.push(next)
			next++
		}
		for range 90 + round%20 {
			if q.len() == 0 {
				break
			}
			require.Equal(t, want, q.front())
			require.Equal(t, want, q.pop())
			want++
		}
	}
	assert.Equal(t, next-want, q.len())
	assert.LessOrEqual(t, cap(q.items), 4096, "popped space is reused")
}

func TestDecisionCacheExpiresAndEvicts(t *testing.T) {
	evicted := 0
	c := newDecisionCache(DecisionCacheConfig{TTL: 60e9, MaxEntries: 2}, func() { evicted++ })
	a, b, d := requestKey{reqID: "a"}, requestKey{reqID: "b"}, requestKey{reqID: "d"}
	c.put(a, verdict{kept: true}, t0)
	c.put(b, verdict{}, t0.Add(30e9))
	v, ok := c.get(a, t0.Add(59e9))
	assert.True(t, ok && v.kept)
	c.expire(t0.Add(60e9))
	_, ok = c.get(a, t0.Add(60e9))
	assert.False(t, ok, "expired after ttl")
	c.put(a, verdict{}, t0.Add(61e9)) // decided again
	c.put(d, verdict{}, t0.Add(62e9)) // over max_entries: b, the oldest, goes
	_, ok = c.get(b, t0.Add(62e9))
	assert.False(t, ok)
	assert.Equal(t, 1, evicted)
	_, ok = c.get(a, t0.Add(62e9))
	assert.True(t, ok, "the newer decision of a is kept")

	off := newDecisionCache(DecisionCacheConfig{}, func() {})
	off.put(a, verdict{kept: true}, t0)
	_, ok = off.get(a, t0)
	assert.False(t, ok, "ttl 0: no cache")
}

// TestDecisionCacheEntriesStaySmall: a full cache holds max_entries
// decisions of requests no longer waiting, whose req_ids are garbage but
// for it.
func TestDecisionCacheEntriesStaySmall(t *testing.T) {
	const entries = 100_000
	c := newDecisionCache(DecisionCacheConfig{TTL: 60e9, MaxEntries: entries}, func() {})
	before := heapInUse()
	for i := range entries {
		c.put(requestKey{reqID: fmt.Sprintf("req-%d-%08x", 1715234890123+i, i)}, verdict{policy: -1}, t0)
	}
	perEntry := (heapInUse() - before) / entries
	runtime.KeepAlive(&c)
	assert.LessOrEqual(t, perEntry, 120, "bytes per decision")
}

func heapInUse() int {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int(m.HeapAlloc)
}
