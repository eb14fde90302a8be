package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/storetest"
)

func open(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "graph.db"), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) eventgraph.Backend { return open(t, Options{}) })
}

func TestOpenRejectsURIPaths(t *testing.T) {
	for _, path := range []string{"", "graph.db?mode=ro", "graph#1.db"} {
		_, err := Open(context.Background(), path, Options{})
		assert.Error(t, err, path)
	}
}

func TestReopenKeepsGraphInWAL(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "graph.db")
	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, storetest.Fixture()))
	var mode string
	require.NoError(t, s.DB().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
	assert.Equal(t, "wal", mode)
	require.NoError(t, s.Close(ctx))

	s, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	defer func() { _ = s.Close(ctx) }()
	got, err := s.Timeline(ctx, storetest.ReqFailing)
	require.NoError(t, err)
	assert.Len(t, got, 8)
}

func count(t *testing.T, s *Store, query string) int {
	t.Helper()
	var n int
	require.NoError(t, s.DB().QueryRow(query).Scan(&n))
	return n
}

func TestPruneByAge(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{MaxAge: time.Hour})
	require.NoError(t, s.Write(ctx, storetest.Fixture()))

	deleted, err := s.Prune(ctx, storetest.T0.Add(time.Hour))
	require.NoError(t, err)
	assert.Zero(t, deleted, "nothing is an hour old yet")

	// An hour after the failing request's async span started, only it and later events remain.
	deleted, err = s.Prune(ctx, storetest.T0.Add(time.Hour+time.Second))
	require.NoError(t, err)
	assert.EqualValues(t, 6, deleted)
	assert.Equal(t, 5, count(t, s, `SELECT count(*) FROM events`))
	assert.Equal(t, 0, count(t, s, `SELECT count(*) FROM caused`), "causes go with their effect")
	assert.Equal(t, 2, count(t, s, `SELECT count(*) FROM requests`), "both requests still have events")

	deleted, err = s.Prune(ctx, storetest.T0.Add(2*time.Hour))
	require.NoError(t, err)
	assert.EqualValues(t, 5, deleted)
	assert.Equal(t, 0, count(t, s, `SELECT count(*) FROM requests`))
}

func TestPruneBySize(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{})
	var events []eventgraph.Event
	for i := range 20_000 {
		events = append(events, eventgraph.Event{
			ID: storetest.ID(i), Kind: eventgraph.KindLog, Time: storetest.T0.Add(time.Duration(i) * time.Millisecond),
			ReqID: "req-" + storetest.ID(i/10), Message: "a message of some length to fill pages with " + storetest.ID(i),
		})
	}
	require.NoError(t, s.Write(ctx, events))
	used, err := s.UsedBytes(ctx)
	require.NoError(t, err)

	s.opts.MaxBytes = used / 2
	deleted, err := s.Prune(ctx, storetest.T0)
	require.NoError(t, err)
	after, err := s.UsedBytes(ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, after, s.opts.MaxBytes)
	assert.Greater(t, deleted, int64(8_000))
	assert.Less(t, deleted, int64(15_000), "no more than needed")
	var oldest int64
	require.NoError(t, s.DB().QueryRow(`SELECT min(time_ns) FROM events`).Scan(&oldest))
	assert.Equal(t, storetest.T0.Add(time.Duration(deleted)*time.Millisecond).UnixNano(), oldest, "the oldest events go first")

	deleted, err = s.Prune(ctx, storetest.T0)
	require.NoError(t, err)
	assert.Zero(t, deleted, "within the bound, nothing more goes")
}
