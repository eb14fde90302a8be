package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"
)

var logSignal = signal[plog.Logs]{
	newBatch: plog.NewLogs,
	count:    plog.Logs.LogRecordCount,
	size:     (&plog.ProtoMarshaler{}).LogsSize,
	appendTo: func(src, dst plog.Logs) { src.ResourceLogs().MoveAndAppendTo(dst.ResourceLogs()) },
	stitch:   (*stitcher).stitchLogs,
	restitch: (*stitcher).restitchLog,
	release:  (*stitcher).releaseLog,
}

var spanSignal = signal[ptrace.Traces]{
	newBatch: ptrace.NewTraces,
	count:    ptrace.Traces.SpanCount,
	size:     (&ptrace.ProtoMarshaler{}).TracesSize,
	appendTo: func(src, dst ptrace.Traces) { src.ResourceSpans().MoveAndAppendTo(dst.ResourceSpans()) },
	stitch:   (*stitcher).stitchSpans,
	restitch: (*stitcher).restitchSpan,
	release:  (*stitcher).releaseSpan,
}

// stitchProcessor is one logs or traces processor: its own hold over the
// stitcher that its component ID shares.
type stitchProcessor[T any] struct {
	s      *stitcher
	sig    signal[T]
	next   func(context.Context, T) error
	hold   holdQueue[T] // guarded by s.mu
	logger *zap.Logger
	// release drops this processor's reference to the shared stitcher.
	release func()
}

func (p *stitchProcessor[T]) process(ctx context.Context, batch T) (T, error) {
	s := p.s
	now := s.nowNanos()
	var overflow T
	overflowed := false
	var hold func(T) bool
	if p.hold.enabled() {
		hold = func(data T) bool {
			s.tally.held++
			pushOut := func(old T) {
				if !overflowed {
					overflow, overflowed = p.sig.newBatch(), true
				}
				releaseHeld(s, p.sig, old, overflow, outcomeOverflow)
			}
			if !p.hold.push(data, p.sig.size(data), now, pushOut) {
				s.tally.released[outcomeOverflow]++
				return false
			}
			return true
		}
	}
	s.mu.Lock()
	p.sig.stitch(s, batch, now, hold)
	s.tel.flush(ctx, &s.tally)
	s.mu.Unlock()
	if overflowed {
		p.sig.appendTo(overflow, batch)
	}
	if p.sig.count(batch) == 0 {
		return batch, processorhelper.ErrSkipProcessingData
	}
	return batch, nil
}

// sweep passes on the held records that are bound or waited long enough (all
// of them when flushing). Nothing downstream is called under the mutex.
func (p *stitchProcessor[T]) sweep(flush bool) {
	p.s.mu.Lock()
	out := sweepHold(p.s, &p.hold, p.sig, p.s.nowNanos(), flush)
	p.s.tel.flush(context.Background(), &p.s.tally)
	p.s.mu.Unlock()
	if p.sig.count(out) == 0 {
		return
	}
	if err := p.next(context.Background(), out); err != nil {
		p.logger.Warn("passing on held records failed", zap.Error(err))
	}
}

func (p *stitchProcessor[T]) start(context.Context, component.Host) error {
	p.s.register(p)
	return nil
}

// shutdown flushes the hold: nothing is dropped by this processor.
func (p *stitchProcessor[T]) shutdown(context.Context) error {
	p.s.unregister(p)
	p.sweep(true)
	p.release()
	return nil
}

// sweeper is a processor whose hold the stitcher's ticker sweeps.
type sweeper interface{ sweep(flush bool) }

// register adds a started processor to the ticker, starting it with the first.
func (s *stitcher) register(w sweeper) {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.sweepers = append(s.sweepers, w)
	if len(s.sweepers) > 1 {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	var tick <-chan time.Time
	stopTicker := func() {}
	if s.testTicks == nil {
		t := time.NewTicker(tickInterval(s.cfg.Hold.Duration))
		tick, stopTicker = t.C, t.Stop
	}
	go s.run(tick, stopTicker, s.stop, s.done)
}

// unregister removes a processor from the ticker, stopping it with the last.
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
	s.expire(s.nowNanos())
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
