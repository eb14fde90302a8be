package eventgraphexporter

import (
	"context"
	"errors"
	"time"

	"github.com/loom-otel/loom/internal/eventgraph"
)

var errWriterStopped = errors.New("eventgraph: the exporter is shut down")

// groupWriter is the one writer of a store: it writes the events of
// concurrent pushes (queue consumers, the logs and traces pipelines) together,
// until maxRows events or maxWait, and answers every push with the outcome of
// the write that held its events (after a permanent error, its own write: see
// flush). One writer per graph keeps writes from contending for the same
// nodes' locks (Neo4j) or the one write lock (SQLite), and big transactions
// are where a graph store is fast.
type groupWriter struct {
	store   eventgraph.Writer
	maxRows int
	maxWait time.Duration
	timeout time.Duration

	requests chan *writeRequest
	stop     chan struct{}
	done     chan struct{}
}

type writeRequest struct {
	events []eventgraph.Event
	result chan error
}

func newGroupWriter(store eventgraph.Writer, maxRows int, maxWait, timeout time.Duration) *groupWriter {
	w := &groupWriter{
		store: store, maxRows: maxRows, maxWait: maxWait, timeout: timeout,
		requests: make(chan *writeRequest),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go w.loop()
	return w
}

// write returns once the events are written, or the write failed, or ctx ended.
// A push that gives up may still be written: writes are idempotent.
func (w *groupWriter) write(ctx context.Context, events []eventgraph.Event) error {
	req := &writeRequest{events: events, result: make(chan error, 1)}
	select {
	case w.requests <- req:
	case <-w.stop:
		return errWriterStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops the loop once the write in progress is answered.
func (w *groupWriter) close() {
	close(w.stop)
	<-w.done
}

func (w *groupWriter) loop() {
	defer close(w.done)
	for {
		select {
		case first := <-w.requests:
			w.flush(w.collect(first))
		case <-w.stop:
			return
		}
	}
}

// collect adds the requests that arrive until the group holds maxRows events
// or maxWait has passed; with maxWait 0 it takes only those already waiting.
func (w *groupWriter) collect(first *writeRequest) []*writeRequest {
	group := []*writeRequest{first}
	rows := len(first.events)
	var deadline <-chan time.Time
	if w.maxWait > 0 {
		timer := time.NewTimer(w.maxWait)
		defer timer.Stop()
		deadline = timer.C
	}
	for rows < w.maxRows {
		var req *writeRequest
		if deadline == nil {
			select {
			case req = <-w.requests:
			default:
				return group
			}
		} else {
			select {
			case req = <-w.requests:
			case <-deadline:
				return group
			case <-w.stop:
				return group
			}
		}
		group = append(group, req)
		rows += len(req.events)
	}
	return group
}

// flush writes the group's events in one write. A permanent error is about
// some push's data, so when the write held several pushes each is written
// again alone: only the pushes with the rejected data fail. Any other error
// answers every push, for exporterhelper to retry.
func (w *groupWriter) flush(group []*writeRequest) {
	if len(group) == 1 {
		group[0].result <- w.writeEvents(group[0].events)
		return
	}
	var events []eventgraph.Event
	for _, req := range group {
		events = append(events, req.events...)
	}
	err := w.writeEvents(events)
	if eventgraph.IsPermanent(err) {
		for _, req := range group {
			req.result <- w.writeEvents(req.events)
		}
		return
	}
	for _, req := range group {
		req.result <- err
	}
}

// writeEvents is one store write, bounded by the timeout.
func (w *groupWriter) writeEvents(events []eventgraph.Event) error {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	return w.store.Write(ctx, events)
}
