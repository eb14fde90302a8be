package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	pdatarequest "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/internal/custody"
)

var logSignal = signal[plog.Logs]{
	name:       "logs",
	newBatch:   plog.NewLogs,
	marshal:    pdatarequest.MarshalLogs,
	unmarshal:  pdatarequest.UnmarshalLogs,
	count:      plog.Logs.LogRecordCount,
	size:       (&plog.ProtoMarshaler{}).LogsSize,
	appendTo:   func(src, dst plog.Logs) { src.ResourceLogs().MoveAndAppendTo(dst.ResourceLogs()) },
	stitch:     (*stitcher).stitchLogs,
	restitch:   (*stitcher).restitchLogs,
	held:       heldLog,
	applyRules: (*stitcher).ruleLogs,
	admit:      (*stitcher).admitLogs,
}

var spanSignal = signal[ptrace.Traces]{
	name:       "traces",
	newBatch:   ptrace.NewTraces,
	marshal:    pdatarequest.MarshalTraces,
	unmarshal:  pdatarequest.UnmarshalTraces,
	count:      ptrace.Traces.SpanCount,
	size:       (&ptrace.ProtoMarshaler{}).TracesSize,
	appendTo:   func(src, dst ptrace.Traces) { src.ResourceSpans().MoveAndAppendTo(dst.ResourceSpans()) },
	stitch:     (*stitcher).stitchSpans,
	restitch:   (*stitcher).restitchSpans,
	held:       heldSpan,
	applyRules: (*stitcher).ruleSpans,
	admit:      (*stitcher).admitSpans,
}

// stitchProcessor is one logs or traces processor: its own hold over the
// stitcher that its component ID shares.
type stitchProcessor[T any] struct {
	id   component.ID
	s    *stitcher
	sig  signal[T]
	next func(context.Context, T) error
	// mu guards hold. A sweep restitches under it, waiting for the shards'
	// owners, which never take it.
	mu     sync.Mutex
	hold   holdQueue[T]
	logger *zap.Logger
	// journal keeps the held records; nil without storage.
	journal *custody.Journal
	refused refusals[T]
	// started is set once start succeeded: only then do the shards' owners
	// run for it, and is there a hold to flush.
	started bool
	// release drops this processor's reference to the shared stitcher.
	release func()
}

func (p *stitchProcessor[T]) process(ctx context.Context, batch T) (T, error) {
	s := p.s
	ps := newPass(s.nowNanos())
	defer ps.free()
	var waiting []parked[T]
	var kept []custody.Entry
	var keepErr error
	var hold func(T, time.Duration) bool
	if p.hold.enabled() {
		// The call's context without its deadline, and its client: made once.
		var heldCtx context.Context
		var client string
		hold = func(data T, wait time.Duration) bool {
			if heldCtx == nil {
				heldCtx, client = context.WithoutCancel(ctx), custody.ClientKey(ctx)
			}
			ps.tally.held++
			held := parked[T]{data: data, bytes: p.sig.size(data), wait: wait, ctx: heldCtx, client: client}
			if !p.hold.fits(held.bytes) {
				ps.tally.released[outcomeOverflow]++
				return false
			}
			if p.journal != nil && keepErr == nil {
				entry := custody.Entry{Seq: p.journal.Next(entryHeld)}
				entry.Data, keepErr = p.sig.marshal(heldCtx, data)
				held.seq = entry.Seq
				kept = append(kept, entry)
			}
			waiting = append(waiting, held)
			return true
		}
	}
	ev := newEventIDs()
	defer ev.free()
	ps.tally.identityRemoved += p.sig.admit(s, batch, ev)
	p.sig.stitch(s, batch, ps, hold, ev)
	overflow := p.holdAll(ctx, waiting, kept, &keepErr, ps)
	s.tel.flush(ctx, &ps.tally)
	p.passOn(overflow)
	ev.rewind()
	p.sig.applyRules(s, batch, ev)
	p.s.rules.flushCounts(ctx, p.s.tel)
	if keepErr != nil {
		// The held records stay held: passed on later, and again when the
		// sender retries. A duplicate rather than a loss.
		return batch, fmt.Errorf("keeping held records in storage: %w", keepErr)
	}
	if p.sig.count(batch) == 0 {
		return batch, processorhelper.ErrSkipProcessingData
	}
	return batch, nil
}

// holdAll puts a batch's waiting records in the hold and writes their
// entries to storage (kept; not when *keepErr is set already, and *keepErr
// is where a failure goes). It returns the older records they pushed out.
func (p *stitchProcessor[T]) holdAll(ctx context.Context, waiting []parked[T], kept []custody.Entry, keepErr *error, ps *pass) releases[T] {
	var overflow releases[T]
	if len(waiting) == 0 {
		return overflow
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, held := range waiting {
		p.hold.push(held, ps.now, func(old parked[T]) { release(p.s, &overflow, &ps.tally, p.sig, old, outcomeOverflow) })
	}
	if len(kept) > 0 && *keepErr == nil {
		// Under the hold's mutex: a sweep must not pass a record on (and
		// delete its entry) before the entry is written.
		*keepErr = p.journal.Keep(ctx, kept...)
	}
	return overflow
}

// The journal of a hold keeps records as they were held, and as they are
// passed on: a replay passes on the same bytes.
const (
	entryHeld custody.Kind = iota + 1
	entryPassedOn
)

// passOn hands released records to the next consumer, each client's with its
// context, and deletes their entries once it has taken them. Records it
// refuses for now wait for the next sweep. Called without any lock.
func (p *stitchProcessor[T]) passOn(out releases[T]) {
	for _, g := range out {
		if !g.stitched {
			p.sig.applyRules(p.s, g.data, nil)
			g.seqs = p.keepPassedOn(g)
			g.stitched = true
		}
		if err := p.next(g.ctx, g.data); err != nil && p.retryLater(g, err) {
			continue
		}
		p.forget(g.seqs)
	}
}

// retryLater keeps records the next consumer refused for another try at the
// next sweep, their entries kept in storage, unless the refusal is permanent
// or hold::max_records of them already wait; then they are dropped, counted.
func (p *stitchProcessor[T]) retryLater(g outgoing[T], err error) bool {
	n := p.sig.count(g.data)
	cause := dropRefused
	if !consumererror.IsPermanent(err) {
		if p.refused.offer(g, n, p.hold.maxRecords) {
			return true
		}
		cause = dropRetriesFull
	}
	p.s.tel.dropped(context.Background(), cause, n)
	p.logger.Warn("Dropped held records the next consumer refused", zap.String("cause", dropCauseNames[cause]), zap.Int("records", n), zap.Error(err))
	return false
}

// forget deletes the entries of records that went on or were dropped.
func (p *stitchProcessor[T]) forget(seqs []custody.Seq) {
	if p.journal == nil || len(seqs) == 0 {
		return
	}
	if err := p.journal.Release(context.Background(), seqs...); err != nil {
		p.logger.Warn("Could not delete passed-on records from storage; a crash now would pass them on again", zap.Error(err))
	}
}

// refusals are released records the next consumer refused with an error
// worth retrying (a full queue, a memory limiter): each sweep offers them
// again before anything newer.
type refusals[T any] struct {
	mu      sync.Mutex
	waiting releases[T]
	records int
}

// offer keeps g (of n records) unless limit records already wait.
func (r *refusals[T]) offer(g outgoing[T], n, limit int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.records+n > limit {
		return false
	}
	r.waiting = append(r.waiting, g)
	r.records += n
	return true
}

// take returns the records waiting for a retry, and forgets them.
func (r *refusals[T]) take() (releases[T], int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	waiting, n := r.waiting, r.records
	r.waiting, r.records = nil, 0
	return waiting, n
}

// keepPassedOn replaces the entries of records about to be passed on by one
// entry of their outgoing form, and returns the entries to delete after.
func (p *stitchProcessor[T]) keepPassedOn(g outgoing[T]) []custody.Seq {
	if p.journal == nil || len(g.seqs) == 0 {
		return g.seqs
	}
	raw, err := p.sig.marshal(g.ctx, g.data)
	if err == nil {
		e := custody.Entry{Seq: p.journal.Next(entryPassedOn), Data: raw}
		if err = p.journal.Replace(context.Background(), g.seqs, e); err == nil {
			return []custody.Seq{e.Seq}
		}
	}
	p.logger.Warn("Could not keep stitched records in storage; a crash now would stitch them again", zap.Error(err))
	return g.seqs
}

// sweep passes on the held records that are bound or waited long enough (all
// of them when flushing). Nothing downstream is called under the hold's mutex.
func (p *stitchProcessor[T]) sweep(flush bool) {
	ps := newPass(p.s.nowNanos())
	defer ps.free()
	p.mu.Lock()
	out := sweepHold(p.s, &p.hold, p.sig, ps, flush)
	p.mu.Unlock()
	p.s.tel.flush(context.Background(), &ps.tally)
	retries, _ := p.refused.take()
	p.passOn(append(retries, out...))
	p.s.rules.flushCounts(context.Background(), p.s.tel)
}

func (p *stitchProcessor[T]) start(ctx context.Context, host component.Host) error {
	if err := p.openJournal(ctx, host); err != nil {
		return err
	}
	p.s.register(p)
	p.started = true
	return nil
}

// shutdown flushes the hold. Records the next consumer still refuses stay in
// storage for the next start; without storage they are dropped, counted. A
// processor that did not start has nothing to flush: what its start took
// from storage stays there.
func (p *stitchProcessor[T]) shutdown(ctx context.Context) error {
	if p.started {
		p.flush(ctx)
	}
	p.release()
	return p.journal.Close(ctx)
}

// flush passes on every held record and leaves the ticker.
func (p *stitchProcessor[T]) flush(ctx context.Context) {
	p.sweep(true)
	p.s.unregister(p)
	if left, n := p.refused.take(); n > 0 {
		if p.journal == nil {
			p.s.tel.dropped(ctx, dropShutdown, n)
		}
		p.logger.Warn("The next consumer refused held records until shutdown",
			zap.Int("records", n), zap.Int("calls", len(left)), zap.Bool("kept_in_storage", p.journal != nil))
	}
}

// sweeper is a processor whose hold the stitcher's ticker sweeps.
type sweeper interface{ sweep(flush bool) }

// register adds a started processor to the ticker, starting it and the
// shards' owners with the first.
func (s *stitcher) register(w sweeper) {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.sweepers = append(s.sweepers, w)
	if len(s.sweepers) > 1 {
		return
	}
	s.startOwners()
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	var tick <-chan time.Time
	stopTicker := func() {}
	if s.testTicks == nil {
		t := time.NewTicker(tickInterval(s.cfg.Hold.Duration))
		tick, stopTicker = t.C, t.Stop
	}
	go s.run(tick, stopTicker, s.stop, s.done)
}

// unregister removes a processor from the ticker, stopping it and the
// shards' owners with the last.
func (s *stitcher) unregister(w sweeper) {
	s.lifecycle.Lock()
	for i, x := range s.sweepers {
		if x == w {
			s.sweepers = append(s.sweepers[:i], s.sweepers[i+1:]...)
			break
		}
	}
	last := len(s.sweepers) == 0
	stop, done := s.stop, s.done
	s.lifecycle.Unlock()
	if last && stop != nil {
		close(stop)
		<-done
		s.owners.Stop()
	}
}

// run is the ticker goroutine: it expires requests and sweeps every hold.
func (s *stitcher) run(tick <-chan time.Time, stopTicker func(), stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	defer stopTicker()
	for {
		select {
		case <-stop:
			return
		case <-tick:
			s.sweepAll()
		case swept := <-s.testTicks:
			s.sweepAll()
			close(swept)
		}
	}
}

func (s *stitcher) sweepAll() {
	ps := newPass(s.nowNanos())
	s.expire(ps)
	s.tel.flush(context.Background(), &ps.tally)
	ps.free()
	s.lifecycle.Lock()
	sweepers := append([]sweeper(nil), s.sweepers...)
	s.lifecycle.Unlock()
	for _, w := range sweepers {
		w.sweep(false)
	}
}

// tickInterval sweeps a few times per hold duration, within [10ms, 1s].
func tickInterval(hold time.Duration) time.Duration {
	return min(max(hold/4, 10*time.Millisecond), time.Second)
}
