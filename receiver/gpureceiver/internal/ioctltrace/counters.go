//go:build linux && amd64

package ioctltrace // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"

import "fmt"

// defaultStatCacheSlots is the BPF program's counter cache size per CPU:
// 128 slots of 384 bytes, 48 KiB a CPU.
const defaultStatCacheSlots = 128

// Stats returns the running total of every call counter in the kernel.
// The BPF program counts a call in its CPU's cache slot for the call's key
// when it has one, else in a shared hash; a slot moves on to another key
// once its counts have been read. Stats keeps the totals across those
// moves (countTotals), so that a key's total never goes down while any
// part of it lives in the kernel.
func (t *Tracer) Stats() ([]Stat, error) {
	t.counts.epoch++
	// Bumped before the read: a slot updated before this is read whole by
	// the time the epoch moves on again (the program's cached_stat).
	if err := t.objs.ReadEpoch.Put(uint32(0), t.counts.epoch); err != nil {
		return nil, fmt.Errorf("read epoch: %w", err)
	}
	parts := map[statPart]partCounts{}
	var (
		slot   uint32
		perCPU []ioctlCachedStat
	)
	cache := t.objs.StatCache.Iterate()
	for cache.Next(&slot, &perCPU) {
		for cpu, c := range perCPU {
			if c.Value.Calls > 0 {
				parts[statPart{cpu: uint32(cpu), slot: slot}] = partCounts{c.Key, c.Value}
			}
		}
	}
	if err := cache.Err(); err != nil {
		return nil, fmt.Errorf("counter cache: %w", err)
	}
	var (
		key   ioctlStatKey
		value ioctlStatValue
	)
	shared := t.objs.Stats.Iterate()
	for shared.Next(&key, &value) {
		parts[statPart{cpu: sharedPart, key: key}] = partCounts{key, value}
	}
	if err := shared.Err(); err != nil {
		return nil, fmt.Errorf("counters: %w", err)
	}
	return t.counts.update(parts), nil
}

// sharedPart is statPart.cpu of the shared hash's entries.
const sharedPart = ^uint32(0)

// statPart is one place in the kernel that counts a key: a CPU's cache
// slot (whatever key it holds now), or the shared hash's entry of a key.
type statPart struct {
	cpu, slot uint32
	key       ioctlStatKey // the shared hash's; zero for a cache slot
}

type partCounts struct {
	key   ioctlStatKey
	value ioctlStatValue
}

// countTotals turns readings of the kernel's parts into totals by key.
type countTotals struct {
	epoch  uint64
	parts  map[statPart]partCounts // at the last reading
	totals map[ioctlStatKey]*ioctlStatValue
}

func newCountTotals() *countTotals {
	return &countTotals{parts: map[statPart]partCounts{}, totals: map[ioctlStatKey]*ioctlStatValue{}}
}

// update adds what each part counted since the last reading to its key's
// total and returns the totals of the keys some part still counts (a key
// gone from the kernel is dropped; should it come back, it counts from
// zero, as after the LRU hash evicted it).
func (c *countTotals) update(parts map[statPart]partCounts) []Stat {
	live := map[ioctlStatKey]bool{}
	for p, now := range parts {
		delta := now.value
		if prev, ok := c.parts[p]; ok && prev.key == now.key {
			switch {
			case now.value.Calls >= prev.value.Calls:
				delta = subtract(now.value, prev.value)
			case p.cpu != sharedPart:
				// A slot moved on to another key and back within one
				// reading, or this read raced its move (the counts are
				// zeroed before the key changes): count nothing now, the
				// next reading counts from here.
				delta = ioctlStatValue{}
			}
			// In the shared hash, fewer calls is the LRU's eviction and a
			// fresh entry: all of it is new.
		}
		total := c.totals[now.key]
		if total == nil {
			total = &ioctlStatValue{}
			c.totals[now.key] = total
		}
		add(total, delta)
		live[now.key] = true
	}
	c.parts = parts
	stats := make([]Stat, 0, len(live))
	for key, total := range c.totals {
		if !live[key] {
			delete(c.totals, key)
			continue
		}
		s := Stat{
			PID: key.Tgid, ProcessComm: cString(key.Comm[:]), Kind: kindOf(key.Kind), Nr: key.Nr,
			Outcome: outcomeOf(key.Status, key.Err), Calls: total.Calls, SumNs: total.SumNs,
		}
		copy(s.Buckets[:], total.Buckets[:])
		stats = append(stats, s)
	}
	return stats
}

func subtract(a, b ioctlStatValue) ioctlStatValue {
	a.Calls -= b.Calls
	a.SumNs -= b.SumNs
	for i := range a.Buckets {
		a.Buckets[i] -= b.Buckets[i]
	}
	return a
}

func add(total *ioctlStatValue, d ioctlStatValue) {
	total.Calls += d.Calls
	total.SumNs += d.SumNs
	for i := range total.Buckets {
		total.Buckets[i] += d.Buckets[i]
	}
}
