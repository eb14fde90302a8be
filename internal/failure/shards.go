package failure

import (
	"hash/maphash"
	"strings"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// numShards splits a learned detector's state, so that the pipelines'
// goroutines observing records of different places rarely wait on each other.
const numShards = 16

// placeKey is where records are compared with each other: one service's
// records of one stage (and model, for latency), spans and logs apart.
type placeKey struct {
	service, stage, model string
	span                  bool
	// self: the place's spans' own time (SelfTimes), not their duration.
	self bool
}

var seed = maphash.MakeSeed()

func (k placeKey) shard() int {
	h := maphash.String(seed, k.service) ^ 31*maphash.String(seed, k.stage) ^ 961*maphash.String(seed, k.model)
	return int(h % numShards)
}

// shardedLRU holds a learned detector's per-place state in numShards
// bounded LRUs, each behind its own lock.
type shardedLRU[V any] struct {
	shards [numShards]lruShard[V]
}

type lruShard[V any] struct {
	mu  sync.Mutex
	lru *simplelru.LRU[placeKey, V]
}

func newShardedLRU[V any](maxPlaces int, evicted func()) *shardedLRU[V] {
	s := &shardedLRU[V]{}
	per := max(1, maxPlaces/numShards)
	for i := range s.shards {
		s.shards[i].lru, _ = simplelru.NewLRU(per, func(placeKey, V) { evicted() })
	}
	return s
}

// acquire locks the shard of key and returns it with key's state, made by
// create when absent; the caller unlocks the shard.
func (s *shardedLRU[V]) acquire(key placeKey, create func(placeKey) V) (*lruShard[V], V) {
	sh := &s.shards[key.shard()]
	sh.mu.Lock()
	v, ok := sh.lru.Get(key)
	if !ok {
		key = cloneKey(key)
		v = create(key)
		sh.lru.Add(key, v)
	}
	return sh, v
}

// lock runs f under the lock of key's shard, for state already in hand.
func (s *shardedLRU[V]) lock(key placeKey, f func()) {
	sh := &s.shards[key.shard()]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f()
}

// each runs f on every place, under the lock of its shard.
func (s *shardedLRU[V]) each(f func(V)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, v := range sh.lru.Values() {
			f(v)
		}
		sh.mu.Unlock()
	}
}

// len is the number of places held.
func (s *shardedLRU[V]) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.lru.Len()
		sh.mu.Unlock()
	}
	return n
}

// cloneKey copies the key's strings: they outlive the record they were read from.
func cloneKey(k placeKey) placeKey {
	k.service, k.stage, k.model = strings.Clone(k.service), strings.Clone(k.stage), strings.Clone(k.model)
	return k
}
