package learner

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// InputDelta is what an instance learned of one input_hash since it last
// shared: the requests it saw and the failures they showed.
type InputDelta struct {
	Hash     string  `json:"h"`
	Requests float64 `json:"r,omitempty"`
	Failures float64 `json:"f,omitempty"`
}

// outbox sums the counts learned since the last TakeDeltas, by hash.
type outbox struct {
	counts  map[string]*Stats
	dropped int
}

func (o *outbox) add(hash string, delta Stats, limit int) {
	if limit <= 0 || hash == "" || len(hash) > maxHashLen {
		return
	}
	s := o.counts[hash]
	if s == nil {
		if len(o.counts) >= limit {
			o.dropped++
			return
		}
		if o.counts == nil {
			o.counts = map[string]*Stats{}
		}
		s = &Stats{}
		o.counts[strings.Clone(hash)] = s // the key outlives the request's records
	}
	s.Requests += delta.Requests
	s.Failures += delta.Failures
}

// TakeDeltas returns what was learned since it was last called, by hash,
// for the peers, and how many hashes did not fit in the outbox; nothing
// unless Config.Outbox is set.
func (l *Learner) TakeDeltas() (deltas []InputDelta, dropped int) {
	o := &l.outbox
	for hash, s := range o.counts {
		deltas = append(deltas, InputDelta{Hash: hash, Requests: s.Requests, Failures: s.Failures})
	}
	dropped = o.dropped
	o.counts, o.dropped = nil, 0
	return deltas, dropped
}

// maxDelta bounds a delta's counts: more requests than one instance decides
// in a push interval are not a count.
const maxDelta = 1e7

var errDelta = errors.New("input delta")

// Merge learns a peer's delta as if its requests had been seen here at now.
func (l *Learner) Merge(d InputDelta, now time.Time) error {
	if d.Hash == "" || len(d.Hash) > maxHashLen || !(d.Requests >= 0 && d.Requests <= maxDelta) ||
		!(d.Failures >= 0 && d.Failures <= maxDelta) || d.Requests == 0 && d.Failures == 0 {
		return fmt.Errorf("%w: %q with %v requests and %v failures is not a count", errDelta, d.Hash, d.Requests, d.Failures)
	}
	l.learn(d.Hash, Stats{Requests: d.Requests, Failures: d.Failures}, now)
	return nil
}
