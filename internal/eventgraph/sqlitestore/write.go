package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/loom-otel/loom/internal/eventgraph"
)

const writtenEventColumns = `event_id, kind, time_ns, end_ns, req_id, stage, model_ver, input_hash, service, host, gpu,
	severity_number, severity_text, status, failed, name, message, trace_id, span_id, parent_span_id,
	async_of, attrs, dim_list, adjusted_count`

// Events whose id is not stored yet are inserted many to a statement. OR
// IGNORE, not an upsert: with an upsert, SQLite journals every page a
// statement of many rows changes, in case it has to undo the statement
// alone (Write undoes the whole transaction on any error), and that cost
// more than the statements saved. The row of an id stored already is
// ignored, and merged by mergeEvent; no other row is, as appendEventArgs
// never leaves a NOT NULL column NULL.
var insertNewEvents = multiRowInsert{
	into:    `INSERT OR IGNORE INTO events (` + writtenEventColumns + `)`,
	columns: 24,
	maxRows: maxRowsPerStatement,
}

// An event written again (a retry, a replay, the same record enriched) is
// merged into the stored one as Neo4j's SET += merges properties: values it
// has replace, values it lacks are kept, and attributes are merged key by key.
// A record of another request (or of none) never merges into an event that a
// request holds (eventgraph.OwnedElsewhere): the update is skipped, and Write
// sees no row changed. One row a statement, so that the rows changed tell
// which event was refused.
var mergeEvent = multiRowInsert{
	into:    `INSERT INTO events (` + writtenEventColumns + `)`,
	columns: 24,
	maxRows: 1,
	onConflict: `ON CONFLICT (event_id) DO UPDATE SET
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
	async_of = coalesce(excluded.async_of, async_of),
	attrs = CASE WHEN attrs IS NULL OR excluded.attrs IS NULL THEN coalesce(excluded.attrs, attrs)
		ELSE json_patch(attrs, excluded.attrs) END,
	dim_list = coalesce(excluded.dim_list, dim_list),
	adjusted_count = coalesce(excluded.adjusted_count, adjusted_count)
WHERE events.req_id IS NULL OR events.req_id = excluded.req_id`,
}

// A cause's values are never NULL, so OR IGNORE ignores only a cause
// stored already (and journals no pages, see insertNewEvents).
var insertCauses = multiRowInsert{
	into:    `INSERT OR IGNORE INTO caused (effect_id, cause_id, type, rule)`,
	columns: 4,
	maxRows: maxRowsPerStatement,
}

// A request's outcome and time span only grow, so merging them is idempotent.
var upsertRequests = multiRowInsert{
	into:    `INSERT INTO requests (req_id, failed, first_ns, last_ns)`,
	columns: 4,
	maxRows: maxRowsPerStatement,
	onConflict: `ON CONFLICT (req_id) DO UPDATE SET
	failed = max(failed, excluded.failed),
	first_ns = min(first_ns, excluded.first_ns),
	last_ns = max(last_ns, excluded.last_ns)`,
}

// writeStatements are prepared once, on the one writing connection:
// prepared for every write, they took a third of a one-event write's time.
type writeStatements struct {
	newEvents, mergeEvent, causes, requests preparedInserts
}

func prepareWrites(ctx context.Context, db *sql.DB) (writeStatements, error) {
	var w writeStatements
	var err error
	for _, prepare := range []struct {
		into   *preparedInserts
		insert multiRowInsert
	}{{&w.newEvents, insertNewEvents}, {&w.mergeEvent, mergeEvent}, {&w.causes, insertCauses}, {&w.requests, upsertRequests}} {
		if *prepare.into, err = prepare.insert.prepare(ctx, db); err != nil {
			return w, errors.Join(fmt.Errorf("sqlitestore: prepare: %w", err), w.close())
		}
	}
	return w, nil
}

func (w writeStatements) close() error {
	return errors.Join(w.newEvents.close(), w.mergeEvent.close(), w.causes.close(), w.requests.close())
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
	lists := s.lists.forWrite(ctx, tx)
	refused, err := s.writes.writeEvents(ctx, tx, events, lists)
	if err != nil {
		return err
	}
	written := eventgraph.Without(events, refused)
	if _, _, err := s.writes.causes.exec(ctx, tx, causeArgs(written)); err != nil {
		return fmt.Errorf("sqlitestore: write causes: %w", err)
	}
	if _, _, err := s.writes.requests.exec(ctx, tx, requestArgs(eventgraph.Requests(written))); err != nil {
		return fmt.Errorf("sqlitestore: write requests: %w", err)
	}
	if err := lists.touch(); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: commit: %w", err)
	}
	lists.committed()
	if s.opts.OnReject != nil {
		for _, i := range refused {
			s.opts.OnReject(events[i])
		}
	}
	return nil
}

// eventWriter writes one Write's events: those whose id the Write has not
// seen before are inserted many to a statement; the ids of those stored
// before the Write and every id seen again are merged one by one, in the
// events' order.
type eventWriter struct {
	ctx   context.Context
	tx    *sql.Tx
	w     writeStatements
	enc   jsonEncoder
	lists *writeDimLists
	// seen are the ids of the events added so far: a statement of new
	// events holds the first event of each id in the Write.
	seen map[string]struct{}
	// pending are the positions of the events whose rows args holds, not inserted yet.
	pending   []int
	args      []any
	mergeArgs []any
	refused   []int
}

// writeEvents writes the events and returns the positions of those it
// refused (another request holds their id), in increasing order.
func (w writeStatements) writeEvents(ctx context.Context, tx *sql.Tx, events []eventgraph.Event, lists *writeDimLists) ([]int, error) {
	ew := eventWriter{ctx: ctx, tx: tx, w: w, lists: lists, seen: make(map[string]struct{}, len(events))}
	for i := range events {
		if err := ew.add(events, i); err != nil {
			return nil, err
		}
	}
	if err := ew.flush(events); err != nil {
		return nil, err
	}
	return ew.refused, nil
}

func (ew *eventWriter) add(events []eventgraph.Event, i int) error {
	e := &events[i]
	if _, again := ew.seen[e.ID]; again {
		if err := ew.flush(events); err != nil {
			return err
		}
		return ew.merge(events, i)
	}
	ew.seen[e.ID] = struct{}{}
	var err error
	if ew.args, err = appendEventArgs(ew.args, e, &ew.enc, ew.lists); err != nil {
		return err
	}
	ew.pending = append(ew.pending, i)
	if len(ew.pending) == maxRowsPerStatement {
		return ew.flush(events)
	}
	return nil
}

// flush inserts the pending events, then merges those whose id was stored before.
func (ew *eventWriter) flush(events []eventgraph.Event) error {
	if len(ew.pending) == 0 {
		return nil
	}
	inserted, lastRowid, err := ew.w.newEvents.exec(ew.ctx, ew.tx, ew.args)
	if err != nil {
		return fmt.Errorf("sqlitestore: write events from %s: %w", events[ew.pending[0]].ID, err)
	}
	pending := ew.pending
	ew.pending, ew.args = ew.pending[:0], ew.args[:0]
	if inserted == int64(len(pending)) {
		return nil
	}
	// SQLite gives a new row the rowid after the largest stored (until that
	// is the largest int64, which no file reaches): the rows inserted have
	// the last rowids, those stored before smaller ones.
	maxStoredRowid := int64(math.MaxInt64)
	if inserted > 0 {
		maxStoredRowid = lastRowid - inserted
	}
	stored, err := ew.storedBefore(events, pending, maxStoredRowid)
	if err != nil {
		return err
	}
	for _, i := range pending {
		if _, ok := stored[events[i].ID]; ok {
			if err := ew.merge(events, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// storedBefore returns the ids, among those of the events at the
// positions, of the rows whose rowid is at most maxRowid.
func (ew *eventWriter) storedBefore(events []eventgraph.Event, positions []int, maxRowid int64) (map[string]struct{}, error) {
	args := []any{maxRowid}
	for _, i := range positions {
		args = append(args, events[i].ID)
	}
	rows, err := ew.tx.QueryContext(ew.ctx, `SELECT event_id FROM events WHERE rowid <= ? AND event_id IN (`+
		placeholders(len(positions))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: stored events: %w", err)
	}
	defer func() { _ = rows.Close() }()
	stored := map[string]struct{}{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlitestore: stored events: %w", err)
		}
		stored[id] = struct{}{}
	}
	return stored, rows.Err()
}

// merge upserts one event, and records it refused when the upsert changed no row.
func (ew *eventWriter) merge(events []eventgraph.Event, i int) error {
	var err error
	if ew.mergeArgs, err = appendEventArgs(ew.mergeArgs[:0], &events[i], &ew.enc, ew.lists); err != nil {
		return err
	}
	changed, _, err := ew.w.mergeEvent.exec(ew.ctx, ew.tx, ew.mergeArgs)
	if err != nil {
		return fmt.Errorf("sqlitestore: write event %s: %w", events[i].ID, err)
	}
	if changed == 0 {
		ew.refused = append(ew.refused, i)
		return nil
	}
	if len(events[i].Dims) == 0 {
		return ew.lists.keepFor(events[i].ID, events[i].Time.UnixNano())
	}
	return nil
}

// appendEventArgs appends the event's row, in the order of writtenEventColumns.
func appendEventArgs(args []any, e *eventgraph.Event, enc *jsonEncoder, lists *writeDimLists) ([]any, error) {
	attrs, err := enc.attrs(e.Attrs)
	if err != nil {
		return nil, eventgraph.Permanent(fmt.Errorf("sqlitestore: event %s: %w", e.ID, err))
	}
	var dimList any
	if len(e.Dims) > 0 {
		if dimList, err = lists.id(e.Dims, enc, e.Time.UnixNano()); err != nil {
			return nil, err
		}
	}
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
		null(e.TraceID), null(e.SpanID), null(e.ParentSpanID), null(e.AsyncOf), attrs, dimList, weight(e.AdjustedCount)), nil
}

func causeArgs(events []eventgraph.Event) []any {
	var args []any
	for i := range events {
		for _, c := range events[i].Causes {
			args = append(args, events[i].ID, c.EventID, c.Type, c.Rule)
		}
	}
	return args
}

func requestArgs(requests []eventgraph.Request) []any {
	args := make([]any, 0, len(requests)*upsertRequests.columns)
	for _, r := range requests {
		args = append(args, r.ReqID, r.Failed, r.First.UnixNano(), r.Last.UnixNano())
	}
	return args
}

// null stores an empty string as NULL: absent, so that a merge keeps the stored value.
func null(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// weight is the stored sampling weight: NULL when the record had none.
func weight(adjustedCount float64) any {
	if adjustedCount == 0 {
		return nil
	}
	return adjustedCount
}
