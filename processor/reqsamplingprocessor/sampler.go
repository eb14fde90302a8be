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
// so that a request's logs and spans share one fate. One goroutine (run)
// owns that state; the pipelines hand it scanned batches over a channel.
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

	now       func() time.Time
	testTicks <-chan chan struct{}

	// outlets are the processors' pipelines by signal, added before Start.
	outlets [numSignals][]*outlet
	// journal keeps the records waiting for a decision; nil without storage.
	journal *custody.Journal

	work    chan *batch
	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}

	startOnce sync.Once
	stopOnce  sync.Once
	started   atomic.Bool

	// Owned by run.
	pending buffer
	cache   decisionCache
	bytes   int
	singles uint64 // records decided alone so far: their draws
	scratch policy.Findings
	guard   volumeGuard
	totals  map[string]*BucketHeat
	counts  map[string]*DecisionCount

	// Published by run for telemetry and the failure map.
	pendingRequests atomic.Int64
	pendingBytes    atomic.Int64
	heatMap         atomic.Pointer[HeatMap]
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
		id:      set.ID,
		cfg:     cfg,
		logger:  set.Logger,
		now:     time.Now,
		work:    make(chan *batch, 16),
		flushes: make(chan chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		pending: newBuffer(),
		totals:  map[string]*BucketHeat{},
		counts:  map[string]*DecisionCount{},
	}
	for _, o := range cfg.options {
		o(s)
	}
	// Policies report through the telemetry, which names them: two steps.
	var tel *telemetry
	s.learner = learner.New(learner.Config{
		HalfLife:       cfg.Learning.HalfLife,
		MinFailures:    cfg.Learning.MinFailures,
		MinFailureRate: cfg.Learning.MinFailureRate,
		PrefixLength:   cfg.Learning.PrefixLength,
		MaxHashes:      cfg.Learning.MaxHashes,
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
	s.cache = newDecisionCache(cfg.DecisionCache, func() { tel.evicted(stateDecisionCache) })
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

// start replays what the last run left in storage and runs the deciding
// goroutine, once for all the processors sharing the sampler: the collector
// creates them all before it starts any.
func (s *sampler) start(ctx context.Context, host component.Host) error {
	var err error
	s.startOnce.Do(func() {
		if err = s.openJournal(ctx, host); err != nil {
			return
		}
		s.started.Store(true)
		registerFailureMap(s.id, s)
		go s.run()
	})
	return err
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
		if s.started.Load() {
			close(s.stop)
			select {
			case <-s.done:
			case <-ctx.Done():
				err = ctx.Err()
			}
			unregisterFailureMap(s.id, s)
		}
		if cerr := s.journal.Close(ctx); cerr != nil {
			err = errors.Join(err, cerr)
		}
		s.tel.tb.Shutdown()
	})
	return err
}

// submit hands a batch that came from a pipeline to the deciding goroutine,
// once it is in storage when there is one: the sender is told it was
// accepted when this returns.
func (s *sampler) submit(ctx context.Context, to *outlet, b *batch) error {
	b.to, b.ctx = to, context.WithoutCancel(ctx)
	if err := s.keep(ctx, b); err != nil {
		return err
	}
	err := s.hand(ctx, b)
	if err != nil {
		s.unkeep(b)
	}
	return err
}

func (s *sampler) hand(ctx context.Context, b *batch) error {
	b.arrived = s.now()
	select {
	case <-s.done: // checked first: the work channel may still have room
		return errShutdown
	default:
	}
	select {
	case s.work <- b:
		return nil
	case <-s.done:
		return errShutdown
	case <-ctx.Done():
		return ctx.Err()
	}
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
	for {
		select {
		case b := <-s.work:
			s.ingest(b)
		case <-ticks:
			s.tick()
		case ack := <-s.testTicks:
			s.drain()
			s.tick()
			close(ack)
		case ack := <-s.flushes:
			s.drain()
			s.decideAll()
			close(ack)
		case <-s.stop:
			s.drain()
			s.decideAll()
			return
		}
	}
}

// tickInterval is how often waiting requests are checked: a tenth of
// decision_wait, between 10ms and 1s.
func tickInterval(wait time.Duration) time.Duration {
	return min(time.Second, max(10*time.Millisecond, wait/10))
}

// drain ingests the batches already handed over.
func (s *sampler) drain() {
	for {
		select {
		case b := <-s.work:
			s.ingest(b)
		default:
			return
		}
	}
}

// ingest adds a batch's records to their requests. Records of requests
// decided earlier take the cached decision; records without any key are
// decided alone.
func (s *sampler) ingest(b *batch) {
	now := b.arrived
	s.bytes += b.bytes
	for gi := range b.groups {
		g := &b.groups[gi]
		if g.single {
			g.verdict = s.decideSingle(&g.facts, now)
			continue
		}
		if v, ok := s.cache.get(g.key, now); ok {
			g.verdict, g.late = v, true
			continue
		}
		r := s.pending.get(g.key)
		if r == nil {
			r = s.pending.add(g.key, now)
		}
		r.facts.merge(&g.facts)
		r.groups = append(r.groups, groupRef{b: b, group: int32(gi)})
		b.undecided++
		s.learn(r, now)
	}
	if b.undecided == 0 {
		s.release(b)
	}
	s.enforceLimits(now)
	s.publishGauges()
}

// enforceLimits decides the oldest requests early until the buffer is
// within max_requests and max_bytes.
func (s *sampler) enforceLimits(now time.Time) {
	for s.pending.len() > 0 {
		reason := earlyMaxRequests
		switch {
		case s.pending.len() > s.cfg.MaxRequests:
		case s.bytes > s.cfg.MaxBytes:
			reason = earlyMaxBytes
		default:
			return
		}
		s.tel.decidedEarly(reason)
		s.decide(s.pending.pop(), now)
	}
}

// tick decides the requests that have waited decision_wait.
func (s *sampler) tick() {
	now := s.now()
	for r := s.pending.oldest(); r != nil && now.Sub(r.arrived) >= s.cfg.DecisionWait; r = s.pending.oldest() {
		s.decide(s.pending.pop(), now)
	}
	s.cache.expire(now)
	s.publishGauges()
	s.publishHeatMap(now)
}

// decideAll decides every waiting request.
func (s *sampler) decideAll() {
	now := s.now()
	for s.pending.len() > 0 {
		s.tel.decidedEarly(earlyShutdown)
		s.decide(s.pending.pop(), now)
	}
	s.publishGauges()
	s.publishHeatMap(now)
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
	switch {
	case !r.counted:
		s.learner.Observe(r.facts.inputHash, failed, now)
	case failed:
		s.learner.ObserveFailure(r.facts.inputHash, now)
	}
	r.counted, r.failureCounted = true, failed
}

// decide settles one request's fate, teaches the policies that learn, remembers it,
// and releases the batches that no longer wait for anything.
func (s *sampler) decide(r *request, now time.Time) {
	entry, d := r.facts.duration()
	req := policy.Request{InputHash: r.facts.inputHash, Entry: entry, Duration: time.Duration(d), Now: now,
		Findings: s.findingsOf(&r.facts)}
	draw := unitHash(r.key, s.decider.seed)
	v := s.guarded(s.decider.decide(&req, r.facts.hits, draw), draw)
	for _, o := range s.observers {
		o.Observe(&req)
	}
	s.count(v, req.InputHash, v.failure != nil)
	s.cache.put(r.key, v, now)
	for _, ref := range r.groups {
		ref.b.groups[ref.group].verdict = v
		if ref.b.undecided--; ref.b.undecided == 0 {
			s.release(ref.b)
		}
	}
}

// decideSingle decides a record that belongs to no request, by the record
// policies and a base-rate draw of its own.
func (s *sampler) decideSingle(f *facts, now time.Time) verdict {
	req := policy.Request{InputHash: f.inputHash, Now: now, Findings: s.findingsOf(f)}
	s.singles++
	draw := unit(mix(s.decider.seed ^ s.singles))
	v := s.guarded(s.decider.decide(&req, f.hits, draw), draw)
	s.tel.decided(v)
	s.countDecision(v)
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

// findingsOf returns the request's findings, or the sampler's empty scratch
// when its records showed nothing (request policies may still add to it).
func (s *sampler) findingsOf(f *facts) *policy.Findings {
	if f.findings != nil {
		return f.findings
	}
	s.scratch = policy.Findings{Verdict: failure.Verdict{Reasons: s.scratch.Verdict.Reasons[:0]}}
	return &s.scratch
}

// release forwards a batch's kept records, annotated, and drops the others.
func (s *sampler) release(b *batch) {
	s.bytes -= b.bytes
	var counts [2][numOutcomes]int64 // [late][outcome]
	keep := func(i int, attrs pcommon.Map) bool {
		g := &b.groups[b.records[i]]
		late := 0
		if g.late {
			late = 1
		}
		counts[late][outcomeOf(g.verdict.kept)]++
		if !g.verdict.kept {
			return false
		}
		attrs.PutStr(golden.SamplingPolicy, s.decider.policyName(g.verdict))
		attrs.PutDouble(golden.SamplingAdjustedCount, g.verdict.adjustedCount())
		if g.verdict.failure != nil {
			g.verdict.failure.Annotate(attrs)
		} else {
			healthy.Annotate(attrs)
		}
		return true
	}
	var kept bool
	switch b.signal {
	case signalLogs:
		filterLogs(b.logs, keep)
		kept = b.logs.LogRecordCount() > 0
	case signalTraces:
		filterTraces(b.traces, keep)
		kept = b.traces.SpanCount() > 0
	}
	var err error
	if kept {
		s.keepDecided(b)
		err = b.to.consume(b.ctx, b)
	}
	s.unkeep(b)
	s.tel.released(b.signal, counts)
	if err != nil {
		s.logger.Warn("The next consumer refused kept records", zap.String("signal", signalNames[b.signal]),
			zap.Int64("records", counts[0][outcomeKept]+counts[1][outcomeKept]), zap.Error(err))
	}
}

func (s *sampler) publishGauges() {
	s.pendingRequests.Store(int64(s.pending.len()))
	s.pendingBytes.Store(int64(s.bytes))
}
