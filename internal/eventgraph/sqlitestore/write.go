package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/loom-otel/loom/internal/eventgraph"
)

// An event written again (a retry, a replay, the same record enriched) is
// merged into the stored one as Neo4j's SET += merges properties: values it
// has replace, values it lacks are kept, and attributes are merged key by key.
// A record of another request (or of none) never merges into an event that a
// request holds (eventgraph.OwnedElsewhere): the update is skipped, and Write
// sees no row changed.
const upsertEvent = `
INSERT INTO events (event_id, kind, time_ns, end_ns, req_id, stage, model_ver, input_hash, service, host, gpu,
	severity_number, severity_text, status, failed, name, message, trace_id, span_id, parent_span_id,
	span_key, parent_key, async_of, attrs, dims, adjusted_count)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (event_id) DO UPDATE SET
	kind = excluded.kind,
	time_ns = excluded.time_ns,
	end_ns = coalesce(excluded.end_ns, end_ns),
	req_id = coalesce(excluded.req_id, req_id),
	stage = coalesce(excluded.stage, stage),
	model_ver = coalesce(excluded.model_ver, model_ver),
	input_hash = coalesce(excluded.input_hash, input_hash),
	service = coalesce(excluded.service, service),
	host = coalesce(excluded.host, host),
	gpu = coalesce(excluded.gpu, gpu),
	severity_number = coalesce(excluded.severity_number, severity_number),
	severity_text = coalesce(excluded.severity_text, severity_text),
	status = coalesce(excluded.status, status),
	failed = excluded.failed,
	name = coalesce(excluded.name, name),
	message = coalesce(excluded.message, message),
	trace_id = coalesce(excluded.trace_id, trace_id),
	span_id = coalesce(excluded.span_id, span_id),
	parent_span_id = coalesce(excluded.parent_span_id, parent_span_id),
	span_key = coalesce(excluded.span_key, span_key),
	parent_key = coalesce(excluded.parent_key, parent_key),
	async_of = coalesce(excluded.async_of, async_of),
	attrs = CASE WHEN attrs IS NULL OR excluded.attrs IS NULL THEN coalesce(excluded.attrs, attrs)
		ELSE json_patch(attrs, excluded.attrs) END,
	dims = coalesce(excluded.dims, dims),
	adjusted_count = coalesce(excluded.adjusted_count, adjusted_count)
WHERE events.req_id IS NULL OR events.req_id = excluded.req_id`

const insertCause = `INSERT INTO caused (effect_id, cause_id, type, rule) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`

// A request's outcome and time span only grow, so merging them is idempotent.
const upsertRequest = `
INSERT INTO requests (req_id, failed, first_ns, last_ns) VALUES (?, ?, ?, ?)
ON CONFLICT (req_id) DO UPDATE SET
	failed = max(failed, excluded.failed),
	first_ns = min(first_ns, excluded.first_ns),
	last_ns = max(last_ns, excluded.last_ns)`

// writeStatements are prepared once, on the one writing connection:
// prepared for every write, they took a third of a one-event write's time.
type writeStatements struct {
	event, cause, request *sql.Stmt
}

func prepareWrites(ctx context.Context, db *sql.DB) (writeStatements, error) {
	var w writeStatements
	var err error
	for _, prepare := range []struct {
		stmt  **sql.Stmt
		query string
	}{{&w.event, upsertEvent}, {&w.cause, insertCause}, {&w.request, upsertRequest}} {
		if *prepare.stmt, err = db.PrepareContext(ctx, prepare.query); err != nil {
			return w, errors.Join(fmt.Errorf("sqlitestore: prepare: %w", err), w.close())
		}
	}
	return w, nil
}

func (w writeStatements) close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{w.event, w.cause, w.request} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	return errors.Join(errs...)
}

// Write upserts the events, their causes and their requests in one transaction.
func (s *Store) Write(ctx context.Context, events []eventgraph.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	refused, err := writeEvents(ctx, tx.StmtContext(ctx, s.writes.event), tx.StmtContext(ctx, s.writes.cause), events)
	if err != nil {
		return err
	}
	if err := writeRequests(ctx, tx.StmtContext(ctx, s.writes.request), eventgraph.Requests(eventgraph.Without(events, refused))); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: commit: %w", err)
	}
	if s.opts.OnReject != nil {
		for _, i := range refused {
			s.opts.OnReject(events[i])
		}
	}
	return nil
}

// writeEvents upserts the events and their causes, and returns the
// positions of those the upsert refused (another request holds their id).
func writeEvents(ctx context.Context, event, cause *sql.Stmt, events []eventgraph.Event) (refused []int, err error) {
	args := make([]any, 0, 26)
	var enc jsonEncoder
	for i := range events {
		e := &events[i]
		if args, err = appendEventArgs(args[:0], e, &enc); err != nil {
			return nil, err
		}
		res, err := event.ExecContext(ctx, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: write event %s: %w", e.ID, err)
		}
		if changed, err := res.RowsAffected(); err == nil && changed == 0 {
			refused = append(refused, i)
			continue
		}
		for _, c := range e.Causes {
			if _, err := cause.ExecContext(ctx, e.ID, c.EventID, c.Type, c.Rule); err != nil {
				return nil, fmt.Errorf("sqlitestore: write cause of %s: %w", e.ID, err)
			}
		}
	}
	return refused, nil
}

// appendEventArgs appends the event's row, in the order of upsertEvent's columns.
func appendEventArgs(args []any, e *eventgraph.Event, enc *jsonEncoder) ([]any, error) {
	attrs, err := enc.attrs(e.Attrs)
	if err != nil {
		return nil, eventgraph.Permanent(fmt.Errorf("sqlitestore: event %s: %w", e.ID, err))
	}
	dims := enc.list(e.Dims)
	var end any
	if !e.End.IsZero() {
		end = e.End.UnixNano()
	}
	var severity any
	if e.Kind == eventgraph.KindLog {
		severity = e.SeverityNumber
	}
	return append(args, e.ID, string(e.Kind), e.Time.UnixNano(), end,
		null(e.ReqID), null(e.Stage), null(e.ModelVer), null(e.InputHash), null(e.Service), null(e.Host), null(e.GPU),
		severity, null(e.SeverityText), null(e.Status), e.Failed, null(e.Name), null(e.Message),
		null(e.TraceID), null(e.SpanID), null(e.ParentSpanID), spanKey(e.SpanRef()), spanKey(e.ParentRef()),
		null(e.AsyncOf), attrs, dims, weight(e.AdjustedCount)), nil
}

func writeRequests(ctx context.Context, stmt *sql.Stmt, requests []eventgraph.Request) error {
	for _, r := range requests {
		if _, err := stmt.ExecContext(ctx, r.ReqID, r.Failed, r.First.UnixNano(), r.Last.UnixNano()); err != nil {
			return fmt.Errorf("sqlitestore: write request: %w", err)
		}
	}
	return nil
}

// null stores an empty string as NULL: absent, so that a merge keeps the stored value.
func null(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// spanKey is the stored form of a span key (eventgraph.Event.SpanKey): the
// FNV-1a hash of "trace/span", taken over the parts, which a joined key and
// hash/fnv would allocate for on every event; NULL when empty.
func spanKey(traceID, spanID string) any {
	if traceID == "" {
		return nil
	}
	return int64(fnv1a(fnv1a(fnv1a(fnvOffset, traceID), "/"), spanID))
}

// FNV-1a, 64 bits, as hash/fnv's New64a.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// weight is the stored sampling weight: NULL when the record had none.
func weight(adjustedCount float64) any {
	if adjustedCount == 0 {
		return nil
	}
	return adjustedCount
}
