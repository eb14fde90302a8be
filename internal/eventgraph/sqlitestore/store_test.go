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
	storetest.Run(t, func(t *testing.T, onReject eventgraph.RejectFunc) eventgraph.Backend {
		return open(t, Options{OnReject: onReject})
	})
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

// TestOpenUpgradesAFileWithoutRankedColumns opens a file written before
// dims and adjusted_count were columns: its events read back unchanged, and
// new events rank with their dimensions.
func TestOpenUpgradesAFileWithoutRankedColumns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "graph.db")
	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	for _, column := range []string{"dims", "adjusted_count"} {
		_, err := s.DB().ExecContext(ctx, "ALTER TABLE events DROP COLUMN "+column)
		require.NoError(t, err)
	}
	_, err = s.DB().ExecContext(ctx, `INSERT INTO events (event_id, kind, time_ns, req_id, failed, attrs) VALUES (?, 'log', ?, 'req-old', 0, ?)`,
		storetest.ID(1), storetest.T0.UnixNano(), `{"eventgraph.dims":["region=eu"],"sampling.adjusted_count":100}`)
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))

	s, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	defer func() { _ = s.Close(ctx) }()
	old, err := s.Timeline(ctx, "req-old")
	require.NoError(t, err)
	require.Len(t, old, 1)
	assert.Equal(t, []string{"region=eu"}, old[0].Dims)
	assert.Equal(t, 100.0, old[0].AdjustedCount)
	assert.Nil(t, old[0].Attrs, "the attributes that are fields now are fields only")

	require.NoError(t, s.Write(ctx, []eventgraph.Event{{ID: storetest.ID(2), Kind: eventgraph.KindLog, Time: storetest.T0, ReqID: "req-new",
		Dims: []string{"region=us"}, AdjustedCount: 10.0}}))
	got, _, err := s.DimensionEvents(ctx, storetest.T0, storetest.T0.Add(time.Second), 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	byReq := map[string]eventgraph.DimensionEvent{got[0].ReqID: got[0], got[1].ReqID: got[1]}
	assert.Equal(t, []string{"region=us"}, byReq["req-new"].Dims)
	assert.Equal(t, 10.0, byReq["req-new"].AdjustedCount)
	assert.Empty(t, byReq["req-old"].Dims, "older events rank without their dimensions until they age out")
	var inAttrs int
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT count(*) FROM events WHERE json_extract(attrs, '$."eventgraph.dims"') IS NOT NULL`).Scan(&inAttrs))
	assert.Equal(t, 1, inAttrs, "new events keep their dimensions in the column only")

	rewritten := old[0]
	rewritten.Dims, rewritten.AdjustedCount = []string{"region=ap"}, 0
	require.NoError(t, s.Write(ctx, []eventgraph.Event{rewritten}))
	old, err = s.Timeline(ctx, "req-old")
	require.NoError(t, err)
	assert.Equal(t, []string{"region=ap"}, old[0].Dims, "a column written since is read before the attribute")
	assert.Equal(t, 100.0, old[0].AdjustedCount, "a column still NULL leaves the attribute")
}

// TestPageCachesAreBounded: the page caches live outside the Go heap, one
// per connection; only the writer's is large, and readers cannot write.
func TestPageCachesAreBounded(t *testing.T) {
	s := open(t, Options{})
	var writer, reader int
	require.NoError(t, s.db.QueryRow(`PRAGMA cache_size`).Scan(&writer))
	require.NoError(t, s.reader.QueryRow(`PRAGMA cache_size`).Scan(&reader))
	assert.Equal(t, -writerCacheKiB, writer)
	assert.Equal(t, -readerCacheKiB, reader)
	assert.Equal(t, maxReadConns, s.reader.Stats().MaxOpenConnections)
	assert.Equal(t, 1, s.db.Stats().MaxOpenConnections)
	_, err := s.reader.Exec(`DELETE FROM events`)
	assert.Error(t, err, "readers are query-only")
}
