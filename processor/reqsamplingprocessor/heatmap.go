package reqsamplingprocessor

import (
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/learner"
)

// FailureMap is the in-process read interface to a running reqsampling
// processor's input_hash failure map, for extensions (such as the rca
// extension) that show it. Find one with LookupFailureMap.
type FailureMap interface {
	// HeatMap returns the latest snapshot, at most one tick old. It is safe
	// for concurrent use and never blocks the processor.
	HeatMap() HeatMap
}

// HeatMap is a snapshot of what the processor has seen and learned.
type HeatMap struct {
	Time time.Time
	// Buckets are the input_hash prefix buckets seen, by prefix; "none"
	// counts requests without input_hash, "other" those whose input_hash
	// does not start with hex digits.
	Buckets []BucketHeat
	// HotInputs are the input hashes hot by their own failure rate, most
	// failures first.
	HotInputs []HotHash
	// TrackedHashes is the number of input hashes the learner remembers.
	TrackedHashes int
	// Decisions counts decided requests by the policy that set their
	// probability (base_rate when none matched); a record with neither
	// req_id nor trace id counts as a request of its own.
	Decisions map[string]DecisionCount
	// PendingRequests is the number of requests waiting for a decision.
	PendingRequests int
}

// BucketHeat is one prefix bucket.
type BucketHeat struct {
	Prefix string
	// Requests, Failures and Kept count decided requests since start.
	Requests, Failures, Kept int64
	// RecentRequests and RecentFailures are the learner's decayed counts.
	RecentRequests, RecentFailures float64
	// Hot is true while the bucket's failure rate makes its unknown hashes hot.
	Hot bool
}

// HotHash is one hot input_hash, with its decayed counts.
type HotHash struct {
	InputHash                      string
	RecentRequests, RecentFailures float64
	FailureRate                    float64
}

// DecisionCount counts one policy's decisions.
type DecisionCount struct {
	Kept, Dropped int64
}

// failureMaps are the running processors' failure maps by component ID:
// outside any data path, written at start and shutdown only.
var failureMaps = struct {
	sync.Mutex
	byID map[component.ID]FailureMap
}{byID: map[component.ID]FailureMap{}}

// LookupFailureMap returns the failure map of the running reqsampling
// processor with this component ID.
func LookupFailureMap(id component.ID) (FailureMap, bool) {
	failureMaps.Lock()
	defer failureMaps.Unlock()
	m, ok := failureMaps.byID[id]
	return m, ok
}

func registerFailureMap(id component.ID, m FailureMap) {
	failureMaps.Lock()
	defer failureMaps.Unlock()
	failureMaps.byID[id] = m
}

func unregisterFailureMap(id component.ID, m FailureMap) {
	failureMaps.Lock()
	defer failureMaps.Unlock()
	if failureMaps.byID[id] == m {
		delete(failureMaps.byID, id)
	}
}

// count reports a decided request in the telemetry and the failure map,
// under the sampler's lock.
func (s *sampler) count(v verdict, inputHash string, failed bool) {
	s.tel.decided(v)
	s.countDecision(v)
	label, ok := s.learner.Bucket(inputHash)
	switch {
	case inputHash == "":
		label = bucketNone
	case !ok:
		label = bucketOther
	}
	s.tel.bucketDecided(label, failed, v.kept)
	t := s.totals[label]
	if t == nil {
		t = &BucketHeat{Prefix: label}
		s.totals[label] = t
	}
	t.Requests++
	if failed {
		t.Failures++
	}
	if v.kept {
		t.Kept++
	}
}

func (s *sampler) countDecision(v verdict) {
	name := s.decider.policyName(v)
	c := s.counts[name]
	if c == nil {
		c = &DecisionCount{}
		s.counts[name] = c
	}
	if v.kept {
		c.Kept++
	} else {
		c.Dropped++
	}
}

// publishHeatMap makes the current failure map readable from other goroutines.
func (s *sampler) publishHeatMap(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.learner.Snapshot(now)
	m := &HeatMap{Time: now, PendingRequests: int(s.pendingRequests()), TrackedHashes: snap.Hashes,
		Decisions: make(map[string]DecisionCount, len(s.counts))}
	recent := map[string]learner.Bucket{}
	for _, b := range snap.Buckets {
		recent[b.Prefix] = b
	}
	for label, t := range s.totals {
		b := *t
		if r, ok := recent[label]; ok {
			b.RecentRequests, b.RecentFailures, b.Hot = r.Requests, r.Failures, r.Hot
		}
		m.Buckets = append(m.Buckets, b)
	}
	slices.SortFunc(m.Buckets, func(a, b BucketHeat) int { return strings.Compare(a.Prefix, b.Prefix) })
	for _, h := range snap.HotHashes {
		m.HotInputs = append(m.HotInputs, HotHash{InputHash: h.InputHash, RecentRequests: h.Requests,
			RecentFailures: h.Failures, FailureRate: h.Rate()})
	}
	for name, c := range s.counts {
		m.Decisions[name] = *c
	}
	s.heatMap.Store(m)
}
