package ring

import (
	"fmt"
	"hash/crc32"
	"testing"
)

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.0.0.%d:4317", i+1)
	}
	return out
}

func key(i int) []byte {
	return AttributeKey("req_id", fmt.Sprintf("req-1715234890%03d-a%05d", i%1000, i))
}

func TestEmptyRingOwnsNothing(t *testing.T) {
	if got := New(nil).Owner(key(1)); got != "" {
		t.Fatalf("owner on an empty ring: %q", got)
	}
}

// The order and repetition of the resolver's list must not matter: every
// gateway and the agents build the same ring from the same set.
func TestRingDependsOnTheSetOnly(t *testing.T) {
	a := New([]string{"b:1", "a:1", "c:1"})
	b := New([]string{"c:1", "a:1", "b:1", "a:1"})
	for i := range 5000 {
		if a.Owner(key(i)) != b.Owner(key(i)) {
			t.Fatalf("key %d: %s != %s", i, a.Owner(key(i)), b.Owner(key(i)))
		}
	}
}

// Every member gets points and a fair share of the keys, and a member
// added takes keys only for itself: what makes a change move about 1/N.
func TestAddingAMemberMovesKeysOnlyToIt(t *testing.T) {
	const keys = 20000
	three, four := New(members(3)), New(members(4))
	owned := map[string]int{}
	moved := 0
	for i := range keys {
		before, after := three.Owner(key(i)), four.Owner(key(i))
		owned[after]++
		if before != after {
			moved++
			if after != members(4)[3] {
				t.Fatalf("key %d moved from %s to %s, not to the member added", i, before, after)
			}
		}
	}
	for _, m := range members(4) {
		if share := float64(owned[m]) / keys; share < 0.15 || share > 0.35 {
			t.Errorf("%s owns %.2f of the keys", m, share)
		}
	}
	if moved != owned[members(4)[3]] {
		t.Errorf("%d keys moved, the new member owns %d", moved, owned[members(4)[3]])
	}
}

func TestWithoutIsTheRingOfTheOthers(t *testing.T) {
	all := New(members(4))
	less, others := all.Without(members(4)[2]), New(append(members(2), members(4)[3]))
	for i := range 5000 {
		if less.Owner(key(i)) != others.Owner(key(i)) {
			t.Fatalf("key %d: %s != %s", i, less.Owner(key(i)), others.Owner(key(i)))
		}
	}
	if less.Has(members(4)[2]) || !less.Has(members(4)[3]) {
		t.Fatalf("members %v", less.Members())
	}
}

// Collisions are resolved by probing ahead: with many members some points
// collide, and each position then holds one point at most.
func TestCollidingPointsTakeTheNextFreePosition(t *testing.T) {
	r := New(members(200)) // 40000 points on 131071 positions
	seen := map[uint32]bool{}
	for i, p := range r.points {
		if seen[p.pos] {
			t.Fatalf("position %d held twice", p.pos)
		}
		seen[p.pos] = true
		if i > 0 && r.points[i-1].pos >= p.pos {
			t.Fatalf("points out of order at %d", i)
		}
	}
	if len(r.points) < 200*pointsPerMember*99/100 {
		t.Fatalf("%d points of %d placed", len(r.points), 200*pointsPerMember)
	}
}

func TestAKeyPastTheLastPointWrapsToTheFirst(t *testing.T) {
	r := New(members(3))
	last := r.points[len(r.points)-1].pos
	for i := 0; ; i++ {
		k := key(i)
		if pos := crc32Pos(k); pos > last {
			if got := r.Owner(k); got != r.points[0].member {
				t.Fatalf("owner %q", got)
			}
			return
		}
	}
}

func TestAttributeKeyIsTheExportersFormat(t *testing.T) {
	if got := string(AttributeKey("req_id", "req-1")); got != "req_id=req-1|" {
		t.Fatalf("%q", got)
	}
}

func crc32Pos(k []byte) uint32 { return crc32.ChecksumIEEE(k) % positions }
