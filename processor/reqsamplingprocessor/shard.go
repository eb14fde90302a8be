package reqsamplingprocessor

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-otel/loom/internal/ring"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/policy"
)

// maxShards bounds num_shards: a shard index fits in a byte.
const maxShards = 256

// shard decides the requests whose key hashes to it. One goroutine, its
// owner (reqshard), owns their waiting records, the decisions it made and
// its share of the limits, and handles the messages sent to the shard, in
// order; what every shard learns from and counts in is the sampler's, under
// its lock.
type shard struct {
	s *sampler

	// Owned by the shard's owner.
	pending     buffer
	cache       decisionCache
	bytes       int // of the parts it has not decided whole
	maxRequests int
	maxBytes    int
	scratch     policy.Findings
	// ordered is true while it carries out an order: the batches it
	// releases then go to the sampler's pool.
	ordered bool

	// Published by run for the gauges.
	pendingRequests atomic.Int64
	pendingBytes    atomic.Int64
}

// message is what a shard is handed: a part of a batch, or (part nil) an order.
type message struct {
	part  *part
	order order
}

// order is what the sampler's ticks, flushes and shutdown ask of every
// shard, once it has taken in the parts handed to it before.
type order struct {
	cmd command
	// ring, when set, is the gateway set to hand waiting requests over by
	// first: a changed one (cmdHandOver), or the others' as this gateway
	// shuts down (cmdFlush, cmdStop).
	ring *ring.Ring
	done *sync.WaitGroup
}

type command uint8

const (
	// cmdTick decides the requests that have waited decision_wait.
	cmdTick command = iota
	// cmdFlush decides every waiting request.
	cmdFlush
	// cmdStop decides every waiting request; nothing is handed after it.
	cmdStop
	// cmdHandOver hands the waiting requests another gateway now owns over to it.
	cmdHandOver
)

// newShard makes one of n shards, with its share of the limits (rounded up).
func newShard(s *sampler, n int) *shard {
	share := func(total int) int { return (total + n - 1) / n }
	cacheCfg := s.cfg.DecisionCache
	cacheCfg.MaxEntries = share(cacheCfg.MaxEntries)
	return &shard{
		s:           s,
		pending:     newBuffer(),
		cache:       newDecisionCache(cacheCfg, func() { s.tel.evicted(stateDecisionCache) }),
		maxRequests: share(s.cfg.MaxRequests),
		maxBytes:    share(s.cfg.MaxBytes),
	}
}

// handle takes in a part, or carries out an order.
func (sh *shard) handle(m message) {
	if m.part != nil {
		sh.ingest(m.part)
		return
	}
	o := m.order
	sh.ordered = true
	if o.ring != nil {
		cause := causeShutdown
		if o.cmd == cmdHandOver {
			cause = causeMemberChange
		}
		sh.handOver(o.ring, cause)
	}
	switch o.cmd {
	case cmdTick:
		sh.tick()
	case cmdFlush, cmdStop:
		sh.decideAll()
	}
	sh.ordered = false
	sh.s.pool.help(sh.s.release)
	o.done.Done()
}

// ingest adds a part's records to their requests. Records of requests
// decided earlier take the cached decision, unless the request was dropped
// and they show a failure: then they and the request's later records are
// kept. Records without any key are decided alone.
func (sh *shard) ingest(p *part) {
	b, now := p.b, p.b.arrived
	sh.bytes += p.bytes
	p.undecided = int32(len(p.groups))
	var decided int32
	for _, gi := range p.groups {
		g := &b.groups[gi]
		if g.single {
			g.verdict = sh.s.decideSingle(&g.facts, now, &sh.scratch)
			decided++
			continue
		}
		if v, ok := sh.cache.get(g.key, now); ok {
			if !v.kept && g.facts.mayShowFailure() {
				if lv := sh.s.judgeLate(&g.facts, now, &sh.scratch); lv.failure != nil {
					v = lv
					sh.cache.put(g.key, v, now)
				}
			}
			g.verdict, g.late = v, true
			decided++
			continue
		}
		r := sh.pending.get(g.key)
		if r == nil {
			r = sh.pending.add(g.key, now)
		}
		r.facts.merge(&g.facts)
		r.groups = append(r.groups, groupRef{part: p, group: gi})
		sh.s.learn(r, now)
	}
	sh.settle(p, decided)
	sh.enforceLimits(now)
	sh.publishGauges()
}

// settle counts n more of a part's groups as decided. The shard stops
// counting the part's bytes once it has decided all of its groups; the
// shard that decides the last group of the batch releases it, or leaves it
// to the pool during an order.
func (sh *shard) settle(p *part, n int32) {
	if p.undecided -= n; p.undecided == 0 {
		sh.bytes -= p.bytes
	}
	if p.b.undecided.Add(-n) == 0 {
		if sh.ordered {
			sh.s.pool.add(p.b)
		} else {
			sh.s.release(p.b)
		}
	}
}

// enforceLimits decides the oldest requests early until the shard is within
// its share of max_requests and max_bytes.
func (sh *shard) enforceLimits(now time.Time) {
	for sh.pending.len() > 0 {
		reason := earlyMaxRequests
		switch {
		case sh.pending.len() > sh.maxRequests:
		case sh.bytes > sh.maxBytes:
			reason = earlyMaxBytes
		default:
			return
		}
		sh.s.tel.decidedEarly(reason)
		sh.decide(sh.pending.pop(), now)
	}
}

// tick decides the requests that have waited decision_wait.
func (sh *shard) tick() {
	now := sh.s.now()
	for r := sh.pending.oldest(); r != nil && now.Sub(r.arrived) >= sh.s.cfg.DecisionWait; r = sh.pending.oldest() {
		sh.decide(sh.pending.pop(), now)
	}
	sh.cache.expire(now)
	sh.publishGauges()
}

// decideAll decides every waiting request.
func (sh *shard) decideAll() {
	now := sh.s.now()
	for sh.pending.len() > 0 {
		sh.s.tel.decidedEarly(earlyShutdown)
		sh.decide(sh.pending.pop(), now)
	}
	sh.publishGauges()
}

// decide settles one request's fate, remembers it, and releases the batches
// that no longer wait for anything.
func (sh *shard) decide(r *request, now time.Time) {
	v := sh.s.decide(r, now, &sh.scratch)
	sh.cache.put(r.key, v, now)
	for _, ref := range r.groups {
		ref.part.b.groups[ref.group].verdict = v
		sh.settle(ref.part, 1)
	}
}

// releasePool is the batches decided whole while the shards carry out an
// order, released by every shard: else the shard that decides last would
// release every batch spanning shards while the others wait for it.
type releasePool struct {
	mu      sync.Mutex
	changed sync.Cond // a batch was added, or a shard is done deciding
	batches fifo[*batch]
	// deciding is the number of shards not done with the order's decisions.
	deciding int
}

func newReleasePool() *releasePool {
	p := &releasePool{}
	p.changed.L = &p.mu
	return p
}

// expect starts an order that n shards carry out.
func (p *releasePool) expect(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deciding = n
}

func (p *releasePool) add(b *batch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batches.push(b)
	p.changed.Signal()
}

// help is called by a shard done deciding: it releases batches until every
// shard is done and none is left.
func (p *releasePool) help(release func(*batch)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deciding--
	p.changed.Broadcast()
	for {
		switch {
		case p.batches.len() > 0:
			b := p.batches.pop()
			p.mu.Unlock()
			release(b)
			p.mu.Lock()
		case p.deciding == 0:
			return
		default:
			p.changed.Wait()
		}
	}
}

func (sh *shard) publishGauges() {
	sh.pendingRequests.Store(int64(sh.pending.len()))
	sh.pendingBytes.Store(int64(sh.bytes))
}
