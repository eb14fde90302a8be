// Package ring is the consistent hash ring of contrib's load_balancing
// exporter (exporter/loadbalancingexporter v0.161.0), rebuilt so that a
// gateway can tell, for any routing key, which member the agents send it to:
// the gateways hand a request over to that member when it is not themselves
// (processor/reqsamplingprocessor, issue 16). It must place every key where
// the exporter does, or the gateways would hand over what the agents already
// routed right; test/e2e's TestGatewaySetChangesMidRun checks it against the
// exporter itself, on every record the agent routes.
//
// The exporter's algorithm, as its source and README describe it: each
// member is given 200 points, point i at crc32-IEEE(member + uint32le(i)) mod
// 131071; the points are sorted by position, then hash, then member, and a
// point whose position is taken moves up to 9 positions ahead (a point that
// would need a 10th is dropped); a key is owned by the member of the first
// point at or after crc32-IEEE(key) mod 131071, wrapping around.
package ring // import "github.com/loom-otel/loom/internal/ring"

import (
	"cmp"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"sort"
)

const (
	// positions is the number of positions on the ring.
	positions = 131071
	// pointsPerMember is the exporter's defaultWeight.
	pointsPerMember = 200
	// probeLimit bounds the positions a point moves ahead to a free one.
	probeLimit = 10
)

// Ring maps routing keys to members. It is immutable: a change of members
// builds a new one.
type Ring struct {
	members []string
	points  []point // by position
}

type point struct {
	pos    uint32
	member string
}

// New builds the ring of members (host:port as the agents' resolver names
// them; order and duplicates do not matter).
func New(members []string) *Ring {
	members = slices.Clone(members)
	slices.Sort(members)
	members = slices.Compact(members)
	type candidate struct {
		pos, hash uint32
		member    string
	}
	candidates := make([]candidate, 0, len(members)*pointsPerMember)
	var index [4]byte
	for _, m := range members {
		for i := range pointsPerMember {
			binary.LittleEndian.PutUint32(index[:], uint32(i))
			h := crc32.Update(crc32.ChecksumIEEE([]byte(m)), crc32.IEEETable, index[:])
			candidates = append(candidates, candidate{pos: h % positions, hash: h, member: m})
		}
	}
	slices.SortFunc(candidates, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.hash, b.hash), cmp.Compare(a.member, b.member))
	})
	taken := make(map[uint32]bool, len(candidates))
	points := make([]point, 0, len(candidates))
	for _, c := range candidates {
		pos, probed := c.pos, 0
		for taken[pos] && probed < probeLimit {
			pos = (pos + 1) % positions
			probed++
		}
		if probed >= probeLimit {
			continue // as the exporter does, even when the last probe found a free position
		}
		taken[pos] = true
		points = append(points, point{pos: pos, member: c.member})
	}
	slices.SortFunc(points, func(a, b point) int { return cmp.Compare(a.pos, b.pos) })
	return &Ring{members: members, points: points}
}

// Members are the ring's members, sorted.
func (r *Ring) Members() []string { return slices.Clone(r.members) }

// Has says whether member is on the ring.
func (r *Ring) Has(member string) bool {
	_, ok := slices.BinarySearch(r.members, member)
	return ok
}

// Without is the ring of the same members less member.
func (r *Ring) Without(member string) *Ring {
	return New(slices.DeleteFunc(slices.Clone(r.members), func(m string) bool { return m == member }))
}

// Owner is the member that key routes to; "" on an empty ring.
func (r *Ring) Owner(key []byte) string {
	if len(r.points) == 0 {
		return ""
	}
	pos := crc32.ChecksumIEEE(key) % positions
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].pos >= pos })
	if i == len(r.points) {
		i = 0 // past the last point: the ring wraps around
	}
	return r.points[i].member
}

// AttributeKey is the exporter's routing key of a record under
// routing_key: attributes with the one attribute attr (the agents route by
// [req_id]): "attr=value|".
func AttributeKey(attr, value string) []byte {
	key := make([]byte, 0, len(attr)+len(value)+2)
	key = append(key, attr...)
	key = append(key, '=')
	key = append(key, value...)
	return append(key, '|')
}
