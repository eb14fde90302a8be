package reqsamplingprocessor

import "time"

// decisionCache remembers recent decisions for ttl, at most max of them, so
// that records arriving after their request was decided share its fate.
type decisionCache struct {
	ttl     int64 // ns; 0 disables the cache
	max     int
	entries map[requestKey]cached
	// order is the insertion order, for expiry and eviction.
	order   fifo[cacheItem]
	evicted func()
}

type cached struct {
	v  verdict
	at int64
}

type cacheItem struct {
	key requestKey
	at  int64
}

func newDecisionCache(cfg DecisionCacheConfig, evicted func()) decisionCache {
	return decisionCache{ttl: int64(cfg.TTL), max: cfg.MaxEntries, entries: map[requestKey]cached{}, evicted: evicted}
}

func (c *decisionCache) get(key requestKey, now time.Time) (verdict, bool) {
	e, ok := c.entries[key]
	if !ok || now.UnixNano()-e.at >= c.ttl {
		return verdict{}, false
	}
	return e.v, true
}

func (c *decisionCache) put(key requestKey, v verdict, now time.Time) {
	if c.ttl == 0 {
		return
	}
	at := now.UnixNano()
	c.entries[key] = cached{v: v, at: at}
	c.order.push(cacheItem{key: key, at: at})
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
