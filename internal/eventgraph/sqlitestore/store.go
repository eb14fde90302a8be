// Package sqlitestore is the embedded event graph: one SQLite file (pure-Go
// driver, WAL), for single-node use without an external service.
//
// Events, their causes and requests are tables. Edges that follow from event
// fields are not stored but derived when read: NEXT through the index on
// (req_id, time, event_id), CHILD_OF from the span ids, ASYNC_OF from
// async_of. They are therefore right whatever order records arrive in, and a
// write touches one row per event plus its causes. Only the rca queries'
// lookups are indexed: see adjacentByScan for the edges that are not.
package sqlitestore // import "github.com/loom-otel/loom/internal/eventgraph/sqlitestore"

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/loom-otel/loom/internal/eventgraph"
)

// Options bound what the store keeps; zero means no bound.
type Options struct {
	// MaxAge: Prune deletes events older than this.
	MaxAge time.Duration
	// MaxBytes: Prune deletes the oldest events until the file's used pages fit in it.
	MaxBytes int64
	// OnReject, when set, is told of each event Write refused (see eventgraph.RejectFunc).
	OnReject eventgraph.RejectFunc
}

// maxReadConns bounds the file's reading connections; one more writes.
const maxReadConns = 4

// Page caches, per connection and outside the Go heap: the writer's is large,
// since random event ids make every batch touch index pages all over the
// file; readers scan windows in time order, which the OS's file cache
// serves about as well. They are sized by what they cost resident: the
// store's caches hold at most writerCacheBytes + maxReadConns*readerCacheBytes
// (96 MiB).
const (
	writerCacheBytes = 64 << 20
	readerCacheBytes = 8 << 20
)

// residentPageBytes is what one cached page costs: SQLite allocates a 4 KiB
// page with its header in one block of a little more, which modernc's
// allocator serves from an 8 KiB slot. A cache_size in KiB counts the page
// and its header only, so a full cache was resident at twice its size.
const residentPageBytes = 8 << 10

// Store is an embedded event graph in one SQLite file.
type Store struct {
	// db writes (one connection); reads go through reader.
	db     *sql.DB
	reader *sql.DB
	writes writeStatements
	lists  dimLists
	opts   Options
	// mu serializes writes and pruning: SQLite has one writer, and waiting here is cheaper than on its lock.
	mu sync.Mutex
}

var (
	_ eventgraph.Backend   = (*Store)(nil)
	_ eventgraph.Adjacency = (*Store)(nil)
)

// Open opens or creates the store at path (its directory must exist) and
// creates its schema. The file is in WAL mode: readers never block the writer.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlitestore: path %q must be a file name without ? or #", path)
	}
	// Checkpointing the WAL every 64 MiB instead of 4 MiB writes each page
	// back once for many batches. NORMAL synchronous in WAL mode syncs at
	// checkpoints, not at every commit.
	dsn := path + "?_busy_timeout=10000&_auto_vacuum=INCREMENTAL&_journal_mode=WAL&_synchronous=NORMAL" +
		"&_pragma=temp_store(MEMORY)&_pragma=wal_autocheckpoint(16384)"
	db, err := openPool(dsn+"&_txlock=immediate", writerCacheBytes, 1)
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitestore: create schema in %s: %w", path, err)
	}
	if err := addRankedColumns(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitestore: upgrade schema in %s: %w", path, err)
	}
	writes, err := prepareWrites(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	lists, err := prepareDimLists(ctx, db)
	if err != nil {
		return nil, errors.Join(err, writes.close(), db.Close())
	}
	reader, err := openPool(dsn+"&_pragma=query_only(1)", readerCacheBytes, maxReadConns)
	if err != nil {
		return nil, errors.Join(err, writes.close(), lists.close(), db.Close())
	}
	return &Store{db: db, reader: reader, writes: writes, lists: lists, opts: opts}, nil
}

// openPool opens conns connections, each with a page cache resident at
// most cacheBytes.
func openPool(dsn string, cacheBytes, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn+"&_pragma=cache_size("+strconv.Itoa(cacheBytes/residentPageBytes)+")")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// Close closes the file.
func (s *Store) Close(context.Context) error {
	return errors.Join(s.writes.close(), s.lists.close(), s.reader.Close(), s.db.Close())
}

// DB is the underlying database, for tests and tools that inspect the file.
func (s *Store) DB() *sql.DB { return s.db }

// addRankedColumns adds the columns dims, adjusted_count and dim_list to a
// file written before they existed. They hold an event's Dims (dims the
// list, dim_list since, see dimLists) and AdjustedCount, which every
// root-cause ranking reads from every event of its window: a json_extract
// per event and attribute was a third of a ranking's read time. The file's
// older events keep them in attrs (eventgraph.dims and
// sampling.adjusted_count): read back whole, they are unchanged; ranked,
// they count with no discovered dimension and weight 1 until they age out
// of the windows people rank.
func addRankedColumns(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info('events')`)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			_ = rows.Close()
			return err
		}
		have[name] = true
	}
	if err := rows.Close(); err != nil {
		return err
	}
	for _, add := range []string{"dims TEXT", "adjusted_count REAL", "dim_list INTEGER"} {
		if name, _, _ := strings.Cut(add, " "); !have[name] {
			if _, err := db.ExecContext(ctx, "ALTER TABLE events ADD COLUMN "+add); err != nil {
				return err
			}
		}
	}
	return nil
}

const schema = `
CREATE TABLE IF NOT EXISTS events (
	event_id        TEXT PRIMARY KEY,
	kind            TEXT NOT NULL,
	time_ns         INTEGER NOT NULL,
	end_ns          INTEGER,
	req_id          TEXT,
	stage           TEXT,
	model_ver       TEXT,
	input_hash      TEXT,
	service         TEXT,
	host            TEXT,
	gpu             TEXT,
	severity_number INTEGER,
	severity_text   TEXT,
	status          TEXT,
	failed          INTEGER NOT NULL,
	name            TEXT,
	message         TEXT,
	trace_id        TEXT,
	span_id         TEXT,
	parent_span_id  TEXT,
	async_of        TEXT,
	attrs           TEXT,
	dims            TEXT,
	adjusted_count  REAL,
	dim_list        INTEGER
);
CREATE INDEX IF NOT EXISTS events_by_request ON events (req_id, time_ns, event_id);
CREATE INDEX IF NOT EXISTS events_by_time ON events (time_ns);
-- Events of no request (noise, the collector's own findings) by time: schema drift findings are read from them.
CREATE INDEX IF NOT EXISTS events_unrequested_by_time ON events (time_ns) WHERE req_id IS NULL;

-- CAUSED edges, written with their effect (the record that carries causal.parents).
CREATE TABLE IF NOT EXISTS caused (
	effect_id TEXT NOT NULL,
	cause_id  TEXT NOT NULL,
	type      TEXT NOT NULL,
	rule      TEXT NOT NULL,
	PRIMARY KEY (effect_id, cause_id, type, rule)
) WITHOUT ROWID;
-- Files written before adjacentByScan also indexed span keys (columns span_key
-- and parent_key, left NULL since), async_of and cause ids.
DROP INDEX IF EXISTS events_by_span;
DROP INDEX IF EXISTS events_by_parent;
DROP INDEX IF EXISTS events_by_async;
DROP INDEX IF EXISTS caused_by_cause;
CREATE TRIGGER IF NOT EXISTS events_delete_caused AFTER DELETE ON events BEGIN
	DELETE FROM caused WHERE effect_id = old.event_id;
END;

-- Lists of dimension values, each stored once (see dimLists); events written
-- before dim_list hold theirs in dims.
CREATE TABLE IF NOT EXISTS dim_lists (
	id      INTEGER PRIMARY KEY,
	list    TEXT NOT NULL UNIQUE,
	last_ns INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS requests (
	req_id   TEXT PRIMARY KEY,
	failed   INTEGER NOT NULL,
	first_ns INTEGER NOT NULL,
	last_ns  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_by_last ON requests (last_ns);
`
