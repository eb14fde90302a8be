// Package learner learns which inputs fail: failure rates per input_hash and
// per input_hash prefix bucket, decayed over time, in bounded memory. A hash
// is hot while it keeps failing often enough; a hash the learner has not yet
// seen enough of is judged by its bucket, so a new member of a failing input
// family is hot from its first request.
package learner // import "github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/learner"

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Config sets what hot means and how much the learner remembers.
type Config struct {
	// HalfLife is how fast old requests and failures are forgotten.
	HalfLife time.Duration
	// MinFailures is the decayed failure count a hash or bucket needs to become hot.
	MinFailures float64
	// MinFailureRate is the failures ÷ requests it needs to become hot.
	MinFailureRate float64
	// PrefixLength is the number of hex digits of a bucket's prefix (1–3).
	PrefixLength int
	// MaxHashes bounds the hashes tracked; the least recently seen is evicted.
	MaxHashes int
	// Outbox bounds the hashes whose counts are kept for peers between two
	// TakeDeltas; 0 keeps none: what is learned is not shared.
	Outbox int
}

// Stats are a hash's or bucket's decayed request and failure counts.
type Stats struct {
	Requests, Failures float64
}

// Rate is Failures ÷ Requests (0 without requests).
func (s Stats) Rate() float64 {
	if s.Requests == 0 {
		return 0
	}
	return s.Failures / s.Requests
}

// maxHashLen bounds the input_hash values learned: longer ones are not
// input_hash values and would let a hostile sender fill the memory.
const maxHashLen = 64

type entry struct {
	Stats
	at  int64 // unix ns of the counts
	hot bool  // judged hot when last observed
}

// Learner is not safe for concurrent use.
type Learner struct {
	cfg     Config
	known   float64 // requests after which a hash is judged on its own counts
	hashes  *simplelru.LRU[string, *entry]
	hot     map[string]*entry // hashes judged hot when last observed
	buckets []entry
	labels  []string // bucket prefixes
	// becameHot is called when a hash (bucket false) or bucket becomes hot.
	becameHot func(key string, bucket bool, s Stats)
	outbox    outbox
}

// New returns an empty learner. evicted is called for every hash evicted to
// stay within MaxHashes, becameHot whenever a hash or bucket becomes hot.
func New(cfg Config, evicted func(), becameHot func(key string, bucket bool, s Stats)) *Learner {
	l := &Learner{
		cfg:       cfg,
		known:     cfg.MinFailures / cfg.MinFailureRate,
		hot:       map[string]*entry{},
		becameHot: becameHot,
	}
	l.hashes, _ = simplelru.NewLRU(max(cfg.MaxHashes, 1), func(key string, _ *entry) {
		delete(l.hot, key)
		evicted()
	})
	n := 1 << (4 * cfg.PrefixLength)
	l.buckets = make([]entry, n)
	l.labels = make([]string, n)
	for i := range l.labels {
		const hex = "0123456789abcdef"
		label := make([]byte, cfg.PrefixLength)
		for d, v := cfg.PrefixLength-1, i; d >= 0; d, v = d-1, v>>4 {
			label[d] = hex[v&0xf]
		}
		l.labels[i] = string(label)
	}
	return l
}

// Observe learns of one request: its input_hash and whether it failed so far.
func (l *Learner) Observe(hash string, failed bool, now time.Time) {
	delta := Stats{Requests: 1}
	if failed {
		delta.Failures = 1
	}
	l.observe(hash, delta, now)
}

// ObserveFailure learns that a request already observed as healthy failed after all.
func (l *Learner) ObserveFailure(hash string, now time.Time) {
	l.observe(hash, Stats{Failures: 1}, now)
}

// observe learns what this instance saw, and keeps it for the peers.
func (l *Learner) observe(hash string, delta Stats, now time.Time) {
	l.learn(hash, delta, now)
	l.outbox.add(hash, delta, l.cfg.Outbox)
}

// learn adds the requests and failures of delta to the hash and its bucket.
func (l *Learner) learn(hash string, delta Stats, now time.Time) {
	if hash == "" || len(hash) > maxHashLen {
		return
	}
	t := now.UnixNano()
	e, ok := l.hashes.Get(hash)
	if !ok {
		e = &entry{at: t}
		l.hashes.Add(strings.Clone(hash), e) // the key outlives the request's records
	}
	if l.count(e, delta, t) {
		if e.hot {
			hash = strings.Clone(hash) // rare: cloned again when the hash is new
			l.hot[hash] = e
			l.becameHot(hash, false, e.Stats)
		} else {
			delete(l.hot, hash)
		}
	}
	if b, ok := l.bucket(hash); ok {
		if e := &l.buckets[b]; l.count(e, delta, t) && e.hot {
			l.becameHot(l.labels[b], true, e.Stats)
		}
	}
}

// count adds delta's requests and failures to e and judges it again; true
// when e.hot changed.
func (l *Learner) count(e *entry, delta Stats, t int64) bool {
	e.Stats = l.decayed(e, t)
	e.at = t
	e.Requests += delta.Requests
	e.Failures += delta.Failures
	wasHot := e.hot
	e.hot = l.isHot(e.hot, e.Stats)
	return e.hot != wasHot
}

// Hot reports whether requests with this input_hash are hot at now: the hash
// itself is, or the learner knows too little of it and its bucket is.
func (l *Learner) Hot(hash string, now time.Time) bool {
	t := now.UnixNano()
	if e, ok := l.hashes.Peek(hash); ok {
		s := l.decayed(e, t)
		if l.isHot(e.hot, s) {
			return true
		}
		if s.Requests >= l.known {
			return false // its own record says it is fine
		}
	}
	b, ok := l.bucket(hash)
	return ok && l.isHot(l.buckets[b].hot, l.decayed(&l.buckets[b], t))
}

// isHot judges counts with hysteresis: a key becomes hot once it has
// MinFailures failures and its failure rate is above MinFailureRate with 95%
// confidence, and stays hot while it keeps above half of both. Confidence
// matters: with 8% of all requests failing at random, one input in fifteen
// shows 3 failures in its first 12 requests by chance alone. Decayed failures
// are rounded to the nearest whole number: three failures a minute apart are
// three recent failures, not 2.97.
func (l *Learner) isHot(wasHot bool, s Stats) bool {
	minFailures, minRate := l.cfg.MinFailures, l.cfg.MinFailureRate
	if wasHot {
		minFailures, minRate = minFailures/2, minRate/2
	}
	return s.Failures+0.5 >= minFailures && s.LowerRate() >= minRate
}

// confidenceZ is the one-sided 95% normal quantile.
const confidenceZ = 1.645

// LowerRate is the lower bound of the failure rate's 95% Wilson score
// interval: the rate the counts show with confidence (0 without requests).
func (s Stats) LowerRate() float64 {
	n := s.Requests
	if n <= 0 {
		return 0
	}
	p, z2 := min(s.Failures/n, 1), confidenceZ*confidenceZ
	center := p + z2/(2*n)
	margin := confidenceZ * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	return max(0, (center-margin)/(1+z2/n))
}

func (l *Learner) decayed(e *entry, t int64) Stats {
	if l.cfg.HalfLife <= 0 || t <= e.at {
		return e.Stats
	}
	f := math.Exp2(-float64(t-e.at) / float64(l.cfg.HalfLife))
	return Stats{Requests: e.Requests * f, Failures: e.Failures * f}
}

// Bucket returns the prefix bucket of hash; false when hash does not start
// with PrefixLength lowercase hex digits.
func (l *Learner) Bucket(hash string) (string, bool) {
	b, ok := l.bucket(hash)
	if !ok {
		return "", false
	}
	return l.labels[b], true
}

func (l *Learner) bucket(hash string) (int, bool) {
	if len(hash) < l.cfg.PrefixLength {
		return 0, false
	}
	b := 0
	for i := 0; i < l.cfg.PrefixLength; i++ {
		c := hash[i]
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			b = b<<4 | int(c-'a'+10)
		default:
			return 0, false
		}
	}
	return b, true
}

// Snapshot is the learner's view at one time.
type Snapshot struct {
	// Buckets are every bucket that has seen a request, by prefix.
	Buckets []Bucket
	// HotHashes are the hashes hot by their own counts, most failures first.
	HotHashes []Hash
	// Hashes is the number of hashes tracked.
	Hashes int
}

// Bucket is one prefix bucket's counts.
type Bucket struct {
	Prefix string
	Stats
	Hot bool
}

// Hash is one hot input_hash's counts.
type Hash struct {
	InputHash string
	Stats
}

// Snapshot returns the learner's counts decayed to now.
func (l *Learner) Snapshot(now time.Time) Snapshot {
	t := now.UnixNano()
	snap := Snapshot{Hashes: l.hashes.Len()}
	for i := range l.buckets {
		e := &l.buckets[i]
		if e.Requests == 0 {
			continue
		}
		s := l.decayed(e, t)
		snap.Buckets = append(snap.Buckets, Bucket{Prefix: l.labels[i], Stats: s, Hot: l.isHot(e.hot, s)})
	}
	for hash, e := range l.hot {
		if s := l.decayed(e, t); l.isHot(true, s) {
			snap.HotHashes = append(snap.HotHashes, Hash{InputHash: hash, Stats: s})
		}
	}
	slices.SortFunc(snap.HotHashes, func(a, b Hash) int {
		return cmp.Or(cmp.Compare(b.Failures, a.Failures), strings.Compare(a.InputHash, b.InputHash))
	})
	return snap
}
