package sqlitestore

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
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

// TestOpenDropsTheIndexesOnlyNeighbourhoodRead opens a file written when
// span keys, async_of and cause ids were indexed and span_key and parent_key
// were written: the indexes go, the columns stay (NULL in new rows), and
// neighbourhoods are those of a file written today.
func TestOpenDropsTheIndexesOnlyNeighbourhoodRead(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "graph.db")
	s, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	for _, stmt := range []string{
		`ALTER TABLE events ADD COLUMN span_key INTEGER`,
		`ALTER TABLE events ADD COLUMN parent_key INTEGER`,
		`CREATE INDEX events_by_span ON events (span_key) WHERE span_key IS NOT NULL`,
		`CREATE INDEX events_by_parent ON events (parent_key) WHERE parent_key IS NOT NULL`,
		`CREATE INDEX events_by_async ON events (async_of) WHERE async_of IS NOT NULL`,
		`CREATE INDEX caused_by_cause ON caused (cause_id)`,
	} {
		_, err := s.DB().ExecContext(ctx, stmt)
		require.NoError(t, err)
	}
	fixture := storetest.Fixture()
	require.NoError(t, s.Write(ctx, fixture[:len(fixture)/2]))
	_, err = s.DB().ExecContext(ctx, `UPDATE events SET span_key = 1, parent_key = 2`)
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))

	s, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	defer func() { _ = s.Close(ctx) }()
	var indexes string
	require.NoError(t, s.DB().QueryRowContext(ctx, `SELECT group_concat(name, ' ') FROM
		(SELECT name FROM sqlite_schema WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name)`).Scan(&indexes))
	assert.Equal(t, "events_by_request events_by_time events_unrequested_by_time requests_by_last", indexes)
	require.NoError(t, s.Write(ctx, fixture[len(fixture)/2:]))
	fresh := open(t, Options{})
	require.NoError(t, fresh.Write(ctx, fixture))
	for _, e := range fixture {
		want, err := fresh.Neighbourhood(ctx, e.ID, eventgraph.MaxDepth)
		require.NoError(t, err)
		got, err := s.Neighbourhood(ctx, e.ID, eventgraph.MaxDepth)
		require.NoError(t, err)
		assert.Equal(t, want, got, e.ID)
	}
}

// residentCacheReport names the file a child test process reports to.
const residentCacheReport = "LOOM_SQLITESTORE_RESIDENT_CACHE_REPORT"

// TestFullWriterCacheStaysWithinItsBytes fills the writer's page cache in a
// process of its own (the allocator keeps what other tests freed) and
// measures what it added to the resident set outside the Go runtime. With
// cache_size in KiB, a full cache was resident at 1.94 times its size.
func TestFullWriterCacheStaysWithinItsBytes(t *testing.T) {
	if path := os.Getenv(residentCacheReport); path != "" {
		fillWriterCache(t, path)
		return
	}
	report := filepath.Join(t.TempDir(), "resident")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullWriterCacheStaysWithinItsBytes$")
	cmd.Env = append(os.Environ(), residentCacheReport+"="+report)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(report)
	require.NoError(t, err)
	resident, err := strconv.ParseInt(string(b), 10, 64)
	require.NoError(t, err)
	assert.LessOrEqual(t, resident, int64(writerCacheBytes)*21/20,
		"a full writer cache added %d KiB outside the Go runtime (bound %d KiB)", resident>>10, writerCacheBytes>>10)
}

// fillWriterCache writes rows of about a page each, 1.5 times what the
// writer's cache holds, and writes to path the anonymous resident memory
// that added outside the Go runtime.
func fillWriterCache(t *testing.T, path string) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "graph.db"), Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close(ctx)) }()
	_, err = s.db.ExecContext(ctx, `CREATE TABLE filler (id INTEGER PRIMARY KEY, body BLOB)`)
	require.NoError(t, err)
	before := anonymousOutsideGo(t)
	body := make([]byte, 3000)
	const rowsPerTx = 1000
	for tx := range 3 * writerCacheBytes / residentPageBytes / 2 / rowsPerTx {
		_, err := s.db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
			INSERT INTO filler (body) SELECT ?1 FROM n`, body, rowsPerTx)
		require.NoError(t, err, "transaction %d", tx)
	}
	added := anonymousOutsideGo(t) - before
	require.NoError(t, os.WriteFile(path, []byte(strconv.FormatInt(added, 10)), 0o600))
}

// anonymousOutsideGo is the process's anonymous resident memory less what
// the Go runtime has mapped and not returned to the OS.
func anonymousOutsideGo(t *testing.T) int64 {
	debug.FreeOSMemory()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal("reading /proc/self/status:", err)
	}
	var anonKiB int64
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			anonKiB, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
		}
	}
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(samples)
	return anonKiB<<10 - int64(samples[0].Value.Uint64()-samples[1].Value.Uint64())
}

// TestPageCachesAreBounded: the page caches live outside the Go heap, one
// per connection; only the writer's is large, and readers cannot write.
func TestPageCachesAreBounded(t *testing.T) {
	s := open(t, Options{})
	var writer, reader int
	require.NoError(t, s.db.QueryRow(`PRAGMA cache_size`).Scan(&writer))
	require.NoError(t, s.reader.QueryRow(`PRAGMA cache_size`).Scan(&reader))
	assert.Equal(t, writerCacheBytes/residentPageBytes, writer, "pages")
	assert.Equal(t, readerCacheBytes/residentPageBytes, reader, "pages")
	assert.Equal(t, maxReadConns, s.reader.Stats().MaxOpenConnections)
	assert.Equal(t, 1, s.db.Stats().MaxOpenConnections)
	_, err := s.reader.Exec(`DELETE FROM events`)
	assert.Error(t, err, "readers are query-only")
}

func dimsEvent(n int, at time.Duration, dims ...string) eventgraph.Event {
	return eventgraph.Event{ID: storetest.ID(n), Kind: eventgraph.KindLog, Time: storetest.T0.Add(at), ReqID: "req-dims", Dims: dims}
}

func timelineDims(t *testing.T, s *Store) map[string][]string {
	t.Helper()
	timeline, err := s.Timeline(context.Background(), "req-dims")
	require.NoError(t, err)
	out := map[string][]string{}
	for _, e := range timeline {
		out[e.ID] = e.Dims
	}
	return out
}

// TestDimListsAreStoredOnce: events with equal lists refer to one stored list.
func TestDimListsAreStoredOnce(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{})
	require.NoError(t, s.Write(ctx, []eventgraph.Event{dimsEvent(1, 0, "a=1"), dimsEvent(2, time.Second, "a=1"), dimsEvent(3, 2*time.Second, "a=2")}))
	require.NoError(t, s.Write(ctx, []eventgraph.Event{dimsEvent(4, 3*time.Second, "a=1"), dimsEvent(5, 4*time.Second)}))
	assert.Equal(t, 2, count(t, s, `SELECT count(*) FROM dim_lists`))
	assert.Equal(t, map[string][]string{storetest.ID(1): {"a=1"}, storetest.ID(2): {"a=1"}, storetest.ID(3): {"a=2"},
		storetest.ID(4): {"a=1"}, storetest.ID(5): nil}, timelineDims(t, s))
}

// TestDimListOfAFailedWriteIsStoredAgain: a list stored by a Write that
// failed is gone with it, and the next Write stores it again.
func TestDimListOfAFailedWriteIsStoredAgain(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{})
	rejected := dimsEvent(2, time.Second)
	rejected.Attrs = map[string]any{"x": math.NaN()}
	require.Error(t, s.Write(ctx, []eventgraph.Event{dimsEvent(1, 0, "a=1"), rejected}))
	require.NoError(t, s.Write(ctx, []eventgraph.Event{dimsEvent(1, 0, "a=1")}))
	assert.Equal(t, map[string][]string{storetest.ID(1): {"a=1"}}, timelineDims(t, s))
}

// TestPruneDeletesDimListsWithTheirLastEvent: a list goes when the last
// event that refers to it does, also when an event merged without
// dimensions kept it to a later time, and is stored again when it comes back.
func TestPruneDeletesDimListsWithTheirLastEvent(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{MaxAge: time.Hour})
	require.NoError(t, s.Write(ctx, []eventgraph.Event{dimsEvent(1, 0, "a=1"), dimsEvent(2, time.Minute, "a=2"), dimsEvent(3, 0, "a=3")}))
	require.NoError(t, s.Write(ctx, []eventgraph.Event{dimsEvent(3, 2*time.Minute)}), "merged later, without its dimensions")

	_, err := s.Prune(ctx, storetest.T0.Add(time.Hour+30*time.Second))
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{storetest.ID(2): {"a=2"}, storetest.ID(3): {"a=3"}}, timelineDims(t, s))
	assert.Equal(t, 2, count(t, s, `SELECT count(*) FROM dim_lists`))

	require.NoError(t, s.Write(ctx, []eventgraph.Event{dimsEvent(4, 3*time.Minute, "a=1")}))
	assert.Equal(t, []string{"a=1"}, timelineDims(t, s)[storetest.ID(4)])
}

// TestEventsWrittenBeforeDimListsKeepTheirDims: a file's events written
// when the list was a column of each event read back with it, in
// timelines and in rankings.
func TestEventsWrittenBeforeDimListsKeepTheirDims(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{})
	_, err := s.DB().ExecContext(ctx, `INSERT INTO events (event_id, kind, time_ns, req_id, failed, dims) VALUES (?, 'log', ?, 'req-dims', 0, '["a=0"]')`,
		storetest.ID(1), storetest.T0.UnixNano())
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, []eventgraph.Event{dimsEvent(2, time.Second, "a=1")}))
	assert.Equal(t, map[string][]string{storetest.ID(1): {"a=0"}, storetest.ID(2): {"a=1"}}, timelineDims(t, s))
	ranked, _, err := s.DimensionEvents(ctx, storetest.T0, storetest.T0.Add(time.Minute), 10)
	require.NoError(t, err)
	require.Len(t, ranked, 2)
	assert.ElementsMatch(t, [][]string{{"a=0"}, {"a=1"}}, [][]string{ranked[0].Dims, ranked[1].Dims})
}
