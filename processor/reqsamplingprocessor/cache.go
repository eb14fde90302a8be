package reqsamplingprocessor

import (
	"hash/maphash"
	"time"
)

// decisionCache remembers recent decisions for ttl, at most max of them, so
// that records arriving after their request was decided share its fate.
//
// It is keyed by a seeded 64-bit hash of the request's key: an entry takes
// 8 bytes of key instead of 32 and does not keep its req_id alive after the
// request is decided, so a full cache costs 91 bytes a decision instead of
// 182. Two requests that collide (about one in 2^64 per pair, and not
// steerable without the seed) share a decision.
type decisionCache struct {
	ttl     int64 // ns; 0 disables the cache
	max     int
	seed    maphash.Seed
	entries map[uint64]cached
	// order is the insertion order, for expiry and eviction.
	order   fifo[cacheItem]
	evicted func()
}

type cached struct {
	v  verdict
	at int64
}

type cacheItem struct {
	key uint64
	at  int64
}

func newDecisionCache(cfg DecisionCacheConfig, evicted func()) decisionCache {
	return decisionCache{ttl: int64(cfg.TTL), max: cfg.MaxEntries, seed: maphash.MakeSeed(), entries: map[uint64]cached{}, evicted: evicted}
}

func (c *decisionCache) hash(key requestKey) uint64 { return maphash.Comparable(c.seed, key) }

func (c *decisionCache) get(key requestKey, now time.Time) (verdict, bool) {
	e, ok := c.entries[c.hash(key)]
	if !ok || now.UnixNano()-e.at >= c.ttl {
		return verdict{}, false
	}
	return e.v, true
}

func (c *decisionCache) put(key requestKey, v verdict, now time.Time) {
	if c.ttl == 0 {
		return
	}
	at, h := now.UnixNano(), c.hash(key)
	c.entries[h] = cached{v: v, at: at}
	c.order.push(cacheItem{key: h, at: at})
	for len(c.entries) > c.max {
		if c.popOldest() {
			c.evicted()
		}
	}
}

// expire forgets the decisions older than ttl.
func (c *decisionCache) expire(now time.Time) {
	t := now.UnixNano()
	for c.order.len() > 0 && t-c.order.front().at >= c.ttl {
		c.popOldest()
	}
}

// popOldest forgets the oldest insertion; true when that forgot an entry
// (an entry decided again since is kept under its newer insertion).
func (c *decisionCache) popOldest() bool {
	item := c.order.pop()
	if e, ok := c.entries[item.key]; ok && e.at == item.at {
		delete(c.entries, item.key)
		return true
	}
	return false
}
