package eventgraphexporter

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
)

// fakeStore records the size of every write. With gate set, a write
// announces itself on entered and waits for gate to close.
type fakeStore struct {
	mu      sync.Mutex
	writes  []int
	err     error
	entered chan struct{}
	gate    chan struct{}
}

func (f *fakeStore) Write(_ context.Context, events []eventgraph.Event) error {
	if f.gate != nil {
		select {
		case f.entered <- struct{}{}:
		default:
		}
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, len(events))
	return f.err
}

func (f *fakeStore) Close(context.Context) error { return nil }

func (f *fakeStore) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.writes...)
}

func events(n int) []eventgraph.Event { return make([]eventgraph.Event, n) }

// writeAll writes the batches concurrently and returns their results.
func writeAll(w *groupWriter, batches ...[]eventgraph.Event) []error {
	errs := make([]error, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches {
		wg.Go(func() { errs[i] = w.write(context.Background(), b) })
	}
	wg.Wait()
	return errs
}

func TestGroupWriterJoinsConcurrentPushes(t *testing.T) {
	store := &fakeStore{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	w := newGroupWriter(store, 100, 0, time.Minute)
	defer w.close()

	// While a write holds the store, three pushes queue up; they are written together.
	first := make(chan error)
	go func() { first <- w.write(context.Background(), events(5)) }()
	<-store.entered
	done := make(chan []error)
	go func() { done <- writeAll(w, events(10), events(10), events(10)) }()
	time.Sleep(100 * time.Millisecond) // the pushes block on the writer, unobservably
	close(store.gate)
	require.NoError(t, <-first)
	require.NoError(t, errors.Join(<-done...))
	assert.Equal(t, []int{5, 30}, store.sizes())
}

func TestGroupWriterBoundsRowsAndWait(t *testing.T) {
	store := &fakeStore{}
	w := newGroupWriter(store, 20, time.Hour, time.Minute)
	defer w.close()
	// Two pushes of 10 fill a group of 20 without waiting for max_wait (an hour).
	errs := writeAll(w, events(10), events(10))
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, []int{20}, store.sizes())

	// A lone push is written after max_wait.
	w2 := newGroupWriter(store, 1000, 20*time.Millisecond, time.Minute)
	defer w2.close()
	began := time.Now()
	require.NoError(t, w2.write(context.Background(), events(1)))
	assert.GreaterOrEqual(t, time.Since(began), 20*time.Millisecond)
}

func TestGroupWriterAnswersEveryPushWithTheWriteError(t *testing.T) {
	boom := errors.New("database unavailable")
	w := newGroupWriter(&fakeStore{err: boom}, 100, 10*time.Millisecond, time.Minute)
	defer w.close()
	for _, err := range writeAll(w, events(1), events(2), events(3)) {
		assert.ErrorIs(t, err, boom)
	}
}

func TestGroupWriterGivesUpWithTheContext(t *testing.T) {
	store := &fakeStore{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	w := newGroupWriter(store, 100, 0, time.Minute)
	defer w.close()
	defer close(store.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, w.write(ctx, events(1)), context.DeadlineExceeded)
}

func TestGroupWriterAfterClose(t *testing.T) {
	w := newGroupWriter(&fakeStore{}, 100, 0, time.Minute)
	w.close()
	assert.ErrorIs(t, w.write(context.Background(), events(1)), errWriterStopped)
}
