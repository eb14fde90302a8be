package workload

import (
	"context"
	"sync"

	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// batcher collects the records of one signal into batches and exports them
// from one goroutine. When every buffer is in flight, add blocks: the
// generator slows down to what the receiver takes instead of dropping records,
// which the SDK's batch processors do when their queue is full. The first
// export error is kept for Run to return.
type batcher[T any] struct {
	export func(context.Context, []T) error

	mu      sync.Mutex
	buf     []T
	queue   chan []T
	free    chan []T
	pending sync.WaitGroup
	done    chan struct{}

	errMu sync.Mutex
	err   error
}

const (
	batchSize    = 1024
	batchBuffers = 3 // one filling, up to two queued or exporting
)

func newBatcher[T any](export func(context.Context, []T) error) *batcher[T] {
	b := &batcher[T]{
		export: export,
		queue:  make(chan []T, batchBuffers),
		free:   make(chan []T, batchBuffers),
		done:   make(chan struct{}),
	}
	for range batchBuffers - 1 {
		b.free <- make([]T, 0, batchSize)
	}
	b.buf = make([]T, 0, batchSize)
	go b.run()
	return b
}

func (b *batcher[T]) add(v T) {
	b.mu.Lock()
	b.buf = append(b.buf, v)
	if len(b.buf) == batchSize {
		b.send()
	}
	b.mu.Unlock()
}

// send queues the current buffer; b.mu must be held.
func (b *batcher[T]) send() {
	if len(b.buf) == 0 {
		return
	}
	b.pending.Add(1)
	b.queue <- b.buf
	b.buf = <-b.free
}

func (b *batcher[T]) run() {
	defer close(b.done)
	for batch := range b.queue {
		if err := b.export(context.Background(), batch); err != nil {
			b.errMu.Lock()
			if b.err == nil {
				b.err = err
			}
			b.errMu.Unlock()
		}
		clear(batch) // let exported records be collected
		b.free <- batch[:0]
		b.pending.Done()
	}
}

// flush exports everything added so far. Export errors are reported once, by close.
func (b *batcher[T]) flush() {
	b.mu.Lock()
	b.send()
	b.mu.Unlock()
	b.pending.Wait()
}

func (b *batcher[T]) firstErr() error {
	b.errMu.Lock()
	defer b.errMu.Unlock()
	return b.err
}

// close flushes, stops the export goroutine and returns the first export
// error; add must not be called after.
func (b *batcher[T]) close() error {
	b.flush()
	close(b.queue)
	<-b.done
	return b.firstErr()
}

// spanSink is the span processor of one TracerProvider; every provider feeds
// the same batcher, so a batch holds spans of many resources, as a collector
// receives them from an agent.
type spanSink struct {
	b *batcher[sdktrace.ReadOnlySpan]
}

func (s spanSink) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s spanSink) OnEnd(span sdktrace.ReadOnlySpan)                { s.b.add(span) }
func (s spanSink) ForceFlush(context.Context) error                { s.b.flush(); return nil }

// Shutdown only flushes: the batcher and its exporter outlive the providers.
func (s spanSink) Shutdown(context.Context) error { s.b.flush(); return nil }

// logSink is the log processor of one LoggerProvider; see spanSink.
type logSink struct{ b *batcher[sdklog.Record] }

func (s logSink) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (s logSink) ForceFlush(context.Context) error                       { s.b.flush(); return nil }
func (s logSink) Shutdown(context.Context) error                         { s.b.flush(); return nil }

func (s logSink) OnEmit(_ context.Context, r *sdklog.Record) error {
	s.b.add(r.Clone()) // r is only valid during OnEmit
	return nil
}
