package eventgraphexporter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
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
	store := &fakeStore{err: boom}
	// max_rows is the three pushes' events: they are written together.
	w := newGroupWriter(store, 6, time.Hour, time.Minute)
	defer w.close()
	for _, err := range writeAll(w, events(1), events(2), events(3)) {
		assert.ErrorIs(t, err, boom)
	}
	assert.Equal(t, []int{6}, store.sizes(), "a retryable error is exporterhelper's to retry, not the writer's")
}

// recordingStore passes writes to a store and records their sizes.
type recordingStore struct {
	eventgraph.Writer
	mu     sync.Mutex
	writes []int
}

func (r *recordingStore) Write(ctx context.Context, events []eventgraph.Event) error {
	r.mu.Lock()
	r.writes = append(r.writes, len(events))
	r.mu.Unlock()
	return r.Writer.Write(ctx, events)
}

func (r *recordingStore) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.writes...)
}

// requestEvents are n log records of one request, with ids from first on.
func requestEvents(reqID string, first, n int) []eventgraph.Event {
	events := make([]eventgraph.Event, n)
	for i := range events {
		events[i] = eventgraph.Event{ID: fmt.Sprintf("%032x", first+i), Kind: eventgraph.KindLog,
			Time: time.Date(2025, 5, 9, 12, 0, i, 0, time.UTC), ReqID: reqID, Message: "step"}
	}
	return events
}

// TestGroupWriterFailsOnlyThePushWithRejectedData: the embedded store
// rejects an event of one push for good (an attribute JSON cannot encode);
// that push fails permanently and the two written in the same group succeed.
func TestGroupWriterFailsOnlyThePushWithRejectedData(t *testing.T) {
	sqlite := openEmbedded(t, filepath.Join(t.TempDir(), "graph.db"))
	store := &recordingStore{Writer: sqlite}
	// max_rows is the three pushes' events and max_wait an hour: they are written together.
	w := newGroupWriter(store, 6, time.Hour, time.Minute)
	defer w.close()
	good1, bad, good2 := requestEvents("req-a", 10, 2), requestEvents("req-b", 20, 2), requestEvents("req-c", 30, 2)
	bad[1].Attrs = map[string]any{"resource_usage.gpu_seconds": math.NaN()}

	errs := writeAll(w, good1, bad, good2)
	require.NoError(t, errs[0])
	require.NoError(t, errs[2])
	require.Error(t, errs[1])
	assert.True(t, eventgraph.IsPermanent(errs[1]), "exporterhelper must drop it, not retry it: %v", errs[1])
	assert.ErrorContains(t, errs[1], bad[1].ID, "the error names the rejected event")
	assert.Equal(t, []int{6, 2, 2, 2}, store.sizes(), "the group failed, then each push was written alone")

	var ids []string
	for _, e := range slices.Concat(good1, bad, good2) {
		ids = append(ids, e.ID)
	}
	stored, err := sqlite.Events(context.Background(), ids)
	require.NoError(t, err)
	var storedIDs []string
	for _, e := range stored {
		storedIDs = append(storedIDs, e.ID)
	}
	assert.ElementsMatch(t, []string{good1[0].ID, good1[1].ID, good2[0].ID, good2[1].ID}, storedIDs,
		"the good pushes are written; the bad push's write was rolled back whole")
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
