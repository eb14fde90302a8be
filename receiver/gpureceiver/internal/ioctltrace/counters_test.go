//go:build linux && amd64

package ioctltrace

import (
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func statKey(tgid uint32) ioctlStatKey { return ioctlStatKey{Tgid: tgid, Nr: 0x2B, Kind: 1} }

func counted(calls uint64) ioctlStatValue {
	v := ioctlStatValue{Calls: calls, SumNs: calls * 1000}
	v.Buckets[9] = calls
	return v
}

func totalOf(stats []Stat, tgid uint32) (uint64, bool) {
	for _, s := range stats {
		if s.PID == tgid {
			return s.Calls, true
		}
	}
	return 0, false
}

// TestCountTotalsFollowSlotsThatMoveOn: a key counted on two CPUs and in
// the shared hash keeps one total that never goes down while any part of
// it lives; a slot that moves on to another key leaves the first key's
// total as it was; a key gone from the kernel is dropped.
func TestCountTotalsFollowSlotsThatMoveOn(t *testing.T) {
	c := newCountTotals()
	a, b := statKey(10), statKey(20)
	cpu0, cpu1 := statPart{cpu: 0, slot: 5}, statPart{cpu: 1, slot: 5}
	hashA := statPart{cpu: sharedPart, key: a}

	stats := c.update(map[statPart]partCounts{cpu0: {a, counted(3)}, cpu1: {a, counted(4)}, hashA: {a, counted(3)}})
	calls, _ := totalOf(stats, 10)
	assert.Equal(t, uint64(10), calls)

	// CPU 1's slot moved on to b; a goes on in CPU 0's slot and the hash.
	stats = c.update(map[statPart]partCounts{cpu0: {a, counted(5)}, cpu1: {b, counted(2)}, hashA: {a, counted(3)}})
	calls, _ = totalOf(stats, 10)
	assert.Equal(t, uint64(12), calls, "a gained 2 on CPU 0 and lost nothing with CPU 1's slot")
	calls, _ = totalOf(stats, 20)
	assert.Equal(t, uint64(2), calls)

	// A reading that raced a slot's move: a's key with the counts zeroed.
	stats = c.update(map[statPart]partCounts{cpu0: {a, counted(0)}, cpu1: {b, counted(2)}, hashA: {a, counted(3)}})
	calls, _ = totalOf(stats, 10)
	assert.Equal(t, uint64(12), calls, "never down")

	// The hash's LRU evicted a and it came back (1 call, fewer than the 3
	// before): all of the new entry is new. CPU 0's slot moved on to b.
	stats = c.update(map[statPart]partCounts{cpu1: {b, counted(2)}, hashA: {a, counted(1)}, cpu0: {b, counted(1)}})
	calls, _ = totalOf(stats, 10)
	assert.Equal(t, uint64(13), calls)
	calls, _ = totalOf(stats, 20)
	assert.Equal(t, uint64(3), calls)

	stats = c.update(map[statPart]partCounts{cpu1: {b, counted(2)}})
	_, ok := totalOf(stats, 10)
	assert.False(t, ok, "a is gone from the kernel")
	stats = c.update(map[statPart]partCounts{cpu1: {b, counted(2)}, hashA: {a, counted(1)}})
	calls, _ = totalOf(stats, 10)
	assert.Equal(t, uint64(1), calls, "and counts from zero when it comes back")
}

// TestCounterCacheCollisions runs the BPF program with one cache slot per
// CPU: of two keys one is counted in the slot, the other in the shared
// hash, each exactly; once the slot's counts have been read, the other key
// takes it over, and the totals stay exact.
func TestCounterCacheCollisions(t *testing.T) {
	requireRoot(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mem := uint32(1)
	tr, _ := startTracerWith(t, Options{Devices: []DeviceMatch{{Major: &mem}}, SlowThreshold: time.Hour, statCacheSlots: 1})
	null, urandom := openDev(t, "/dev/null"), openDev(t, "/dev/urandom")
	alloc := params(32, 28, 0x51)
	var entropy int32
	calls := func(fd int, cmd uintptr, arg unsafe.Pointer, n int) {
		for range n {
			ioctl(fd, cmd, arg)
		}
	}
	byEscape := func() map[string]uint64 {
		stats, err := tr.Stats()
		require.NoError(t, err)
		out := map[string]uint64{}
		for _, s := range stats {
			if s.PID == uint32(os.Getpid()) {
				out[EscapeName(s.Kind, s.Nr)] += s.Calls
			}
		}
		return out
	}
	calls(null, cmdRMAlloc, unsafe.Pointer(&alloc[0]), 30)
	calls(urandom, unix.RNDGETENTCNT, unsafe.Pointer(&entropy), 20) // RNDGETENTCNT is nr 0x00
	assert.Equal(t, map[string]uint64{"NV_ESC_RM_ALLOC": 30, "NV_ESC_0x00": 20}, byEscape())

	// Both readings above and here bump the epoch: the slot may move on now.
	byEscape()
	calls(urandom, unix.RNDGETENTCNT, unsafe.Pointer(&entropy), 5)
	calls(null, cmdRMAlloc, unsafe.Pointer(&alloc[0]), 7)
	got := byEscape()
	assert.Equal(t, uint64(25), got["NV_ESC_0x00"], "counted in the hash, then in a slot")
	assert.Equal(t, uint64(37), got["NV_ESC_RM_ALLOC"])
}
