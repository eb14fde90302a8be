package reqsamplingprocessor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/internal/custody"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/reqshard"
	"github.com/loom-otel/loom/internal/ring"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/learner"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/policy"
)

// healthy is the verdict on the kept records of a request that did not fail.
var healthy failure.Verdict

// errShutdown answers records sent after the processor shut down.
var errShutdown = errors.New("reqsampling processor is shut down")

// sampler is the state shared by the logs and traces processors of one
// component ID: the requests waiting for a decision and the decisions made,
// so that a request's logs and spans share one fate. The requests are split
// between shards by a hash of their key, each owned by its goroutine; the
// pipelines hand every shard its part of a scanned batch over its channel.
// One more goroutine (run) ticks the shards and publishes the failure map.
type sampler struct {
	id      component.ID
	cfg     *Config
	logger  *zap.Logger
	tel     *telemetry
	decider decider
	learner *learner.Learner
	// observers are the policies that learn from every decided request.
	observers []policy.Observer
	scanners  *sync.Pool

	set        component.TelemetrySettings
	now        func() time.Time
	testTicks  <-chan chan struct{}
	testPushes <-chan chan struct{}
	// testMembers replaces the hand-over's resolver.
	testMembers ring.Resolver
	// share exchanges what the failure model learns with the peers; nil
	// when nothing is shared.
	share *sharer
	// handover keeps every request on the gateway that owns it; nil when
	// handover::self is not set.
	handover *handover

	// outlets are the processors' pipelines by signal, added before Start.
	outlets [numSignals][]*outlet
	// journal keeps the records waiting for a decision; nil without storage.
	journal *custody.Journal
	// unreplayed are the entries the last run left, by signal, until the
	// processor of their signal starts.
	unreplayed [numSignals][]custody.Entry

	shards []*shard
	// owners run the shards from Start to shutdown.
	owners *reqshard.Owners[message]
	pool   *releasePool
	// shardSeed seeds the hash that picks a request's shard.
	shardSeed uint64
	flushes   chan chan struct{}
	stop      chan struct{}
	done      chan struct{}

	// handing is held (read) while a batch's parts are handed to the
	// shards, so that none is handed part of a batch once shutdown began.
	handing sync.RWMutex
	closed  bool

	// starting serializes the processors' starts.
	starting sync.Mutex
	stopOnce sync.Once
	started  atomic.Bool

	// mu guards what every shard learns from and counts decisions in.
	mu      sync.Mutex
	singles uint64 // records decided alone so far: their draws
	guard   volumeGuard
	totals  map[string]*BucketHeat
	counts  map[string]*DecisionCount

	// Published by run for the failure map.
	heatMap atomic.Pointer[HeatMap]
}

var _ FailureMap = (*sampler)(nil)

func newSampler(set processor.Settings, cfg *Config) (*sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	s := &sampler{
		id:        set.ID,
		set:       set.TelemetrySettings,
		cfg:       cfg,
		logger:    set.Logger,
		now:       time.Now,
		shardSeed: cfg.HashSeed ^ shardSalt,
		pool:      newReleasePool(),
		flushes:   make(chan chan struct{}),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		totals:    map[string]*BucketHeat{},
		counts:    map[string]*DecisionCount{},
	}
	for _, o := range cfg.options {
		o(s)
	}
	var outbox shareOutbox // kept only for someone to push to
	if cfg.Share.pushes() {
		outbox = sharedOutbox
	}
	// Policies report through the telemetry, which names them: two steps.
	var tel *telemetry
	s.learner = learner.New(learner.Config{
		HalfLife:       cfg.Learning.HalfLife,
		MinFailures:    cfg.Learning.MinFailures,
		MinFailureRate: cfg.Learning.MinFailureRate,
		PrefixLength:   cfg.Learning.PrefixLength,
		MaxHashes:      cfg.Learning.MaxHashes,
		Outbox:         outbox.hashes,
	}, func() { tel.evicted(stateInputHash) }, s.becameHot)
	policies, err := compilePolicies(cfg, policyDeps{
		set:     set.TelemetrySettings,
		learner: s.learner,
		evalFailed: func(i int) func(error) {
			return func(err error) {
				tel.policyFailed(i)
				s.logger.Debug("Policy condition could not be evaluated", zap.Error(err))
			}
		},
		seriesEvicted: func() { tel.evicted(stateLatencySeries) },
		driftEvicted:  func() { tel.evicted(stateDriftPlace) },
		now:           func() time.Time { return s.now() },
		outbox:        outbox.blocks,
	})
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	tel = newTelemetry(tb, policies)
	s.tel = tel
	s.decider = decider{policies: policies, base: cfg.BasePercentage / 100, seed: cfg.HashSeed}
	s.guard = volumeGuard{maxShare: cfg.VolumeGuard.MaxShare}
	for _, p := range policies {
		if p.observer != nil {
			s.observers = append(s.observers, p.observer)
		}
	}
	s.scanners = newScannerPool(policies)
	if cfg.Share.enabled() {
		s.share = newSharer(s, policies)
	}
	if cfg.Handover.enabled() {
		s.handover = newHandover(s)
	}
	for range cfg.NumShards {
		s.shards = append(s.shards, newShard(s, cfg.NumShards))
	}
	s.heatMap.Store(&HeatMap{Decisions: map[string]DecisionCount{}})
	if err := tel.registerGauges(s); err != nil {
		tb.Shutdown()
		return nil, err
	}
	return s, nil
}

func (s *sampler) becameHot(key string, bucket bool, st learner.Stats) {
	kind := "input_hash"
	if bucket {
		kind = "bucket"
	}
	s.logger.Info("Input became hot: its requests are kept", zap.String("kind", kind), zap.String("key", key),
		zap.Float64("failures", st.Failures), zap.Float64("failure_rate", st.Rate()))
}

// start runs the sampler with the first of its processors, then replays
// what the last run left in storage for the starting processor's signal.
// The collector creates every processor before it starts any, and starts a
// pipeline's downstream components before its processors, so a replayed
// record always finds its pipeline running: the records of a signal whose
// processor has not started yet wait for it.
func (s *sampler) start(ctx context.Context, host component.Host, sig signal) error {
	s.starting.Lock()
	defer s.starting.Unlock()
	if !s.started.Load() {
		if err := s.startShared(ctx, host); err != nil {
			return err
		}
	}
	return s.replay(ctx, sig)
}

// startShared opens the storage and starts the goroutines, once for all the
// processors sharing the sampler.
func (s *sampler) startShared(ctx context.Context, host component.Host) error {
	if err := s.openJournal(ctx, host); err != nil {
		return err
	}
	if s.share != nil {
		if err := s.share.start(ctx, host); err != nil {
			return err
		}
	}
	if s.handover != nil {
		if err := s.handover.start(ctx, host); err != nil {
			return err
		}
	}
	s.started.Store(true)
	registerFailureMap(s.id, s)
	s.owners = reqshard.Start(len(s.shards), shardInbox, func(i int, m message) { s.shards[i].handle(m) })
	go s.run()
	return nil
}

// flush decides every waiting request now and forwards the kept records:
// one of the processors is shutting down, and its pipeline will send no more.
func (s *sampler) flush(ctx context.Context) error {
	if !s.started.Load() {
		return nil
	}
	ack := make(chan struct{})
	select {
	case s.flushes <- ack:
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shutdown decides and forwards everything pending, then stops: the last
// processor sharing the sampler is shutting down.
func (s *sampler) shutdown(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		s.handing.Lock()
		s.closed = true
		s.handing.Unlock()
		if s.started.Load() {
			close(s.stop)
			select {
			case <-s.done:
			case <-ctx.Done():
				err = ctx.Err()
			}
			unregisterFailureMap(s.id, s)
		}
		if s.share != nil && s.started.Load() {
			err = errors.Join(err, s.share.shutdown(ctx))
		}
		if s.handover != nil && s.started.Load() {
			err = errors.Join(err, s.handover.shutdown(ctx))
		}
		if cerr := s.journal.Close(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
		s.tel.tb.Shutdown()
	})
	return err
}

// submit hands a batch that came from a pipeline to the shards, once it is
// in storage when there is one: the sender is told it was accepted when
// this returns.
func (s *sampler) submit(ctx context.Context, to *outlet, b *batch) error {
	b.to, b.ctx = to, context.WithoutCancel(ctx)
	if err := s.keep(ctx, b); err != nil {
		return err
	}
	err := s.admit(ctx, b)
	if err != nil {
		s.unkeep(b)
	}
	return err
}

// admit hands a batch to the shards that own its requests, to wait for a
// decision.
func (s *sampler) admit(ctx context.Context, b *batch) error {
	if s.cfg.CompactWaiting {
		b.compact()
	}
	s.split(b)
	return s.hand(ctx, b)
}

// shardInbox is how many messages a shard's owner may be behind before a
// sender waits.
const shardInbox = 16

// shardSalt makes the shard of a request independent of its draw.
const shardSalt = 0x9e3779b97f4a7c15

// shardOf is the index of the shard that owns the request with this key.
func (s *sampler) shardOf(key requestKey) int {
	return int(mix(keyHash(key, s.shardSeed)) % uint64(len(s.shards)))
}

// split makes a part of the batch's groups for every shard that owns one of
// its requests; records without a key go to a shard by their group's place
// in the batch.
func (s *sampler) split(b *batch) {
	b.undecided.Store(int32(len(b.groups)))
	var partOf [maxShards]int32 // index+1 in b.parts; 0: none yet
	for gi := range b.groups {
		g := &b.groups[gi]
		sh := gi % len(s.shards)
		if !g.single {
			sh = s.shardOf(g.key)
		}
		if partOf[sh] == 0 {
			b.parts = append(b.parts, part{b: b, shard: sh})
			partOf[sh] = int32(len(b.parts))
		}
		p := &b.parts[partOf[sh]-1]
		p.groups = append(p.groups, int32(gi))
		p.bytes += g.bytes
	}
	if len(b.parts) == 0 { // no record: a shard releases it all the same
		b.parts = append(b.parts, part{b: b})
	}
}

// hand gives every shard its part of the batch.
func (s *sampler) hand(ctx context.Context, b *batch) error {
	b.arrived = s.now()
	s.handing.RLock()
	defer s.handing.RUnlock()
	if s.closed {
		return errShutdown
	}
	first := &b.parts[0]
	if err := s.owners.SendContext(ctx, first.shard, message{part: first}); err != nil {
		return err
	}
	// The batch is the shards' now: every part must follow.
	for i := 1; i < len(b.parts); i++ {
		p := &b.parts[i]
		s.owners.Send(p.shard, message{part: p})
	}
	return nil
}

// HeatMap implements FailureMap.
func (s *sampler) HeatMap() HeatMap { return *s.heatMap.Load() }

func (s *sampler) run() {
	defer close(s.done)
	var ticks <-chan time.Time
	if s.testTicks == nil {
		ticker := time.NewTicker(tickInterval(s.cfg.DecisionWait))
		defer ticker.Stop()
		ticks = ticker.C
	}
	// ringChanges and leaving are the hand-over's: a changed gateway set,
	// and the others' ring that takes what waits as this gateway shuts down.
	var ringChanges <-chan *ring.Ring
	leaving := func() *ring.Ring { return nil }
	if s.handover != nil {
		ringChanges, leaving = s.handover.changes, s.handover.leaving
	}
	for {
		select {
		case <-ticks:
			s.orderShards(order{cmd: cmdTick})
		case ack := <-s.testTicks:
			s.orderShards(order{cmd: cmdTick})
			close(ack)
		case r := <-ringChanges:
			s.orderShards(order{cmd: cmdHandOver, ring: r})
		case ack := <-s.flushes:
			s.orderShards(order{cmd: cmdFlush, ring: leaving()})
			close(ack)
		case <-s.stop:
			s.orderShards(order{cmd: cmdStop, ring: leaving()})
			s.owners.Stop()
			return
		}
	}
}

// orderShards has every shard carry out o, and publishes the failure map once
// all have.
func (s *sampler) orderShards(o order) {
	var done sync.WaitGroup
	done.Add(len(s.shards))
	s.pool.expect(len(s.shards))
	o.done = &done
	for i := range s.shards {
		s.owners.Send(i, message{order: o})
	}
	done.Wait()
	s.publishHeatMap(s.now())
}

// tickInterval is how often waiting requests are checked: a tenth of
// decision_wait, between 10ms and 1s.
func tickInterval(wait time.Duration) time.Duration {
	return min(time.Second, max(10*time.Millisecond, wait/10))
}

// learn teaches the learner what a waiting request has shown so far. It
// learns on arrival, not on decision: by the time a request is decided the
// learner knows the failures of decision_wait more traffic, so the first
// silent failures of a newly failing input are kept too.
func (s *sampler) learn(r *request, now time.Time) {
	if r.facts.inputHash == "" || r.failureCounted {
		return
	}
	failed := s.decider.failed(r.facts.hits)
	if r.counted && !failed {
		return
	}
	s.mu.Lock()
	if r.counted {
		s.learner.ObserveFailure(r.facts.inputHash, now)
	} else {
		s.learner.Observe(r.facts.inputHash, failed, now)
	}
	s.mu.Unlock()
	r.counted, r.failureCounted = true, failed
}

// decide settles one request's fate and teaches the policies that learn;
// scratch is the deciding shard's.
func (s *sampler) decide(r *request, now time.Time, scratch *policy.Findings) verdict {
	entry, d := r.facts.duration()
	req := policy.Request{InputHash: r.facts.inputHash, Entry: entry, Duration: time.Duration(d), Spans: r.facts.spans, Now: now,
		Findings: findingsOf(&r.facts, scratch)}
	draw := unitHash(r.key, s.decider.seed)
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.guarded(s.decider.decide(&req, r.facts.hits, draw), draw)
	for _, o := range s.observers {
		o.Observe(&req)
	}
	s.count(v, req.InputHash, v.failure != nil)
	return v
}

// decideSingle decides a record that belongs to no request, by the record
// policies and a base-rate draw of its own; scratch is the deciding shard's.
func (s *sampler) decideSingle(f *facts, now time.Time, scratch *policy.Findings) verdict {
	req := policy.Request{InputHash: f.inputHash, Now: now, Findings: findingsOf(f, scratch)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.singles++
	draw := unit(mix(s.decider.seed ^ s.singles))
	v := s.guarded(s.decider.decide(&req, f.hits, draw), draw)
	s.tel.decided(v)
	s.countDecision(v)
	return v
}

// judgeLate decides records that arrived after their request was dropped,
// on what they show alone: a failure keeps them (counted: the request was
// decided before its failure arrived, and is kept only in part).
func (s *sampler) judgeLate(f *facts, now time.Time, scratch *policy.Findings) verdict {
	entry, d := f.duration()
	req := policy.Request{InputHash: f.inputHash, Entry: entry, Duration: time.Duration(d), Now: now,
		Findings: findingsOf(f, scratch)}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.decider.decide(&req, f.hits, 0)
	if v.failure == nil {
		return verdict{}
	}
	v.kept = true
	s.tel.lateFailure()
	return v
}

// guarded applies the volume guard: a request that only a policy which
// reports no failure would keep is decided at the base rate while those
// policies keep more than their share.
func (s *sampler) guarded(v verdict, draw float64) verdict {
	if s.guard.admit(v) {
		return v
	}
	s.tel.throttled(v)
	return s.decider.baseVerdict(draw)
}

// findingsOf returns the request's findings, or scratch, emptied, when its
// records showed nothing (request policies may still add to it).
func findingsOf(f *facts, scratch *policy.Findings) *policy.Findings {
	if f.findings != nil {
		return f.findings
	}
	*scratch = policy.Findings{Verdict: failure.Verdict{Reasons: scratch.Verdict.Reasons[:0]}}
	return scratch
}

// release forwards a batch's kept records, annotated, and drops the others,
// on the goroutine of the shard that decided its last request. A compacted
// batch is decoded only when it keeps a record.
func (s *sampler) release(b *batch) {
	var counts [2][numOutcomes]int64 // [late][outcome]
	for _, gi := range b.records {
		g := &b.groups[gi]
		late, o := 0, outcomeOf(g.verdict.kept)
		if g.late {
			late = 1
		}
		if g.verdict.handedOver {
			o = outcomeHandedOver
		}
		counts[late][o]++
	}
	var err error
	if counts[0][outcomeKept]+counts[1][outcomeKept] > 0 {
		err = s.passOnKept(b)
	}
	s.unkeep(b)
	s.tel.released(b.signal, counts)
	if err != nil {
		s.logger.Warn("Kept records were not passed on", zap.String("signal", signalNames[b.signal]),
			zap.Int64("records", counts[0][outcomeKept]+counts[1][outcomeKept]), zap.Error(err))
	}
}

// annotations counts the attributes a kept record gains: the policy, the
// adjusted count, the verdict and its reasons.
const annotations = 4

// passOnKept filters a batch down to its kept records, annotates them with
// their request's verdict and passes them on.
func (s *sampler) passOnKept(b *batch) error {
	keeps := func(i int) bool {
		v := &b.groups[b.records[i]].verdict
		return v.kept && !v.handedOver
	}
	scanIndex := func(i int) int { return i }
	if b.encoded != nil {
		kept, err := b.expandKept(keeps)
		if err != nil {
			return err
		}
		keeps = func(int) bool { return true }
		scanIndex = func(i int) int { return int(kept[i]) }
	}
	annotate := func(i int, attrs pcommon.Map) bool {
		if !keeps(i) {
			return false
		}
		v := &b.groups[b.records[scanIndex(i)]].verdict
		attrs.EnsureCapacity(attrs.Len() + annotations) // grown once, not attribute by attribute
		attrs.PutStr(golden.SamplingPolicy, s.decider.policyName(*v))
		attrs.PutDouble(golden.SamplingAdjustedCount, v.adjustedCount())
		if v.failure != nil {
			v.failure.Annotate(attrs)
		} else {
			healthy.Annotate(attrs)
		}
		return true
	}
	if b.signal == signalLogs {
		filterLogs(b.logs, annotate)
	} else {
		filterTraces(b.traces, annotate)
	}
	s.keepDecided(b)
	return b.to.consume(b.ctx, b)
}

// pendingRequests and pendingBytes are the shards' last published, summed.
func (s *sampler) pendingRequests() int64 {
	var n int64
	for _, sh := range s.shards {
		n += sh.pendingRequests.Load()
	}
	return n
}

func (s *sampler) pendingBytes() int64 {
	var n int64
	for _, sh := range s.shards {
		n += sh.pendingBytes.Load()
	}
	return n
}
