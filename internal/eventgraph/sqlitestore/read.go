package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
)

const eventColumns = `event_id, kind, time_ns, end_ns, req_id, stage, model_ver, input_hash, service, host, gpu,
	severity_number, severity_text, status, failed, name, message, trace_id, span_id, parent_span_id, async_of, attrs,
	coalesce((SELECT list FROM dim_lists WHERE id = dim_list), dims), adjusted_count`

// Timeline returns the request's events in time order, with their causes.
func (s *Store) Timeline(ctx context.Context, reqID string) ([]eventgraph.Event, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE req_id = ? ORDER BY time_ns, event_id`, reqID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: timeline: %w", err)
	}
	events, err := scanEvents(rows)
	if err != nil {
		return nil, err
	}
	return events, s.attachCauses(ctx, events)
}

// SchemaDrifts returns the drift findings in [from, to), in time order.
func (s *Store) SchemaDrifts(ctx context.Context, from, to time.Time) ([]eventgraph.Event, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+eventColumns+` FROM events INDEXED BY events_unrequested_by_time
		WHERE req_id IS NULL AND time_ns >= ? AND time_ns < ? AND json_extract(attrs, '$."`+golden.DriftOldModelVer+`"') IS NOT NULL
		ORDER BY time_ns, event_id`, from.UnixNano(), to.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: schema drifts: %w", err)
	}
	return scanEvents(rows)
}

// maxIn bounds the ids bound in one IN list, far below SQLite's 32766 variables.
const maxIn = 500

// Events returns the stored events among ids, with their causes.
func (s *Store) Events(ctx context.Context, ids []string) ([]eventgraph.Event, error) {
	var out []eventgraph.Event
	for chunk := range chunks(ids) {
		rows, err := s.reader.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE event_id IN (`+placeholders(len(chunk))+`)`, chunk...)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: events: %w", err)
		}
		events, err := scanEvents(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, events...)
	}
	return out, s.attachCauses(ctx, out)
}

func (s *Store) attachCauses(ctx context.Context, events []eventgraph.Event) error {
	byID := make(map[string]*eventgraph.Event, len(events))
	ids := make([]string, len(events))
	for i := range events {
		byID[events[i].ID] = &events[i]
		ids[i] = events[i].ID
	}
	for chunk := range chunks(ids) {
		rows, err := s.reader.QueryContext(ctx, `SELECT effect_id, cause_id, type, rule FROM caused WHERE effect_id IN (`+
			placeholders(len(chunk))+`) ORDER BY effect_id, cause_id, type, rule`, chunk...)
		if err != nil {
			return fmt.Errorf("sqlitestore: causes: %w", err)
		}
		for rows.Next() {
			var effect string
			var c eventgraph.Cause
			if err := rows.Scan(&effect, &c.EventID, &c.Type, &c.Rule); err != nil {
				_ = rows.Close()
				return fmt.Errorf("sqlitestore: causes: %w", err)
			}
			e := byID[effect]
			e.Causes = append(e.Causes, c)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("sqlitestore: causes: %w", err)
		}
	}
	return nil
}

// Neighbourhood returns the events within depth edges of the event (see eventgraph.Store).
func (s *Store) Neighbourhood(ctx context.Context, eventID string, depth int) (eventgraph.Graph, error) {
	return eventgraph.Traverse(ctx, s, eventID, depth)
}

// adjacentByIndexQuery derives the edges of one event (?1) that indexes find:
// NEXT to its neighbours in request order, ASYNC_OF to the event it was
// detached from, and the CAUSED edges into it whose cause is stored.
const adjacentByIndexQuery = `
WITH me AS (SELECT event_id, req_id, time_ns, async_of FROM events WHERE event_id = ?1)
SELECT * FROM (SELECT 'NEXT', p.event_id, me.event_id, '', '' FROM me JOIN events p
	ON p.req_id = me.req_id AND (p.time_ns, p.event_id) < (me.time_ns, me.event_id)
	ORDER BY p.time_ns DESC, p.event_id DESC LIMIT 1)
UNION ALL SELECT * FROM (SELECT 'NEXT', me.event_id, n.event_id, '', '' FROM me JOIN events n
	ON n.req_id = me.req_id AND (n.time_ns, n.event_id) > (me.time_ns, me.event_id)
	ORDER BY n.time_ns, n.event_id LIMIT 1)
UNION ALL SELECT 'ASYNC_OF', me.event_id, r.event_id, '', '' FROM me JOIN events r ON r.event_id = me.async_of
UNION ALL SELECT 'CAUSED', c.cause_id, c.effect_id, c.type, c.rule FROM caused c
	JOIN events x ON x.event_id = c.cause_id WHERE c.effect_id = ?1`

// Adjacent returns the edges that touch the given events (see eventgraph.Adjacency).
func (s *Store) Adjacent(ctx context.Context, ids []string) ([]eventgraph.Edge, error) {
	out, err := s.adjacentByIndex(ctx, ids)
	if err != nil {
		return nil, err
	}
	for chunk := range chunks(ids) {
		if out, err = s.adjacentByScan(ctx, chunk, out); err != nil {
			return nil, fmt.Errorf("sqlitestore: adjacent: %w", err)
		}
	}
	return out, nil
}

func (s *Store) adjacentByIndex(ctx context.Context, ids []string) ([]eventgraph.Edge, error) {
	conn, err := s.reader.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	stmt, err := conn.PrepareContext(ctx, adjacentByIndexQuery)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: adjacent: %w", err)
	}
	defer func() { _ = stmt.Close() }()
	var out []eventgraph.Edge
	for _, id := range ids {
		rows, err := stmt.QueryContext(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: adjacent: %w", err)
		}
		if out, err = appendEdges(out, rows); err != nil {
			return nil, fmt.Errorf("sqlitestore: adjacent: %w", err)
		}
	}
	return out, nil
}

func appendEdges(out []eventgraph.Edge, rows *sql.Rows) ([]eventgraph.Edge, error) {
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var e eventgraph.Edge
		if err := rows.Scan(&e.Type, &e.From, &e.To, &e.CauseType, &e.Rule); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// adjacentByScan appends the edges of the events (ids, at most maxIn) that
// no index finds: CHILD_OF both ways, ASYNC_OF into them and CAUSED out of
// them. The indexes that would find them (span keys, async_of, cause ids)
// hold random keys, which made every write touch their pages all over the
// file, and only Neighbourhood reads them, which the rca extension does not
// call: one scan of each table finds them for all the events instead.
func (s *Store) adjacentByScan(ctx context.Context, ids []any, out []eventgraph.Edge) ([]eventgraph.Edge, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+spanColumns+` FROM events WHERE event_id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return nil, err
	}
	events, err := scanSpans(rows)
	if err != nil {
		return nil, err
	}
	var traces []any
	for _, e := range events {
		if e.TraceID != "" {
			traces = append(traces, e.TraceID)
		}
	}
	rows, err = s.reader.QueryContext(ctx, `SELECT `+spanColumns+` FROM events WHERE trace_id IN (`+placeholders(len(traces))+
		`) OR async_of IN (`+placeholders(len(ids))+`)`, append(traces, ids...)...)
	if err != nil {
		return nil, err
	}
	related, err := scanSpans(rows)
	if err != nil {
		return nil, err
	}
	out = appendSpanEdges(out, events, related)
	rows, err = s.reader.QueryContext(ctx, `SELECT 'CAUSED', c.cause_id, c.effect_id, c.type, c.rule FROM caused c
		JOIN events x ON x.event_id = c.effect_id WHERE c.cause_id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return nil, err
	}
	return appendEdges(out, rows)
}

// spanColumns are what scanSpans reads: what CHILD_OF and ASYNC_OF edges follow from.
const spanColumns = `event_id, kind, coalesce(trace_id, ''), coalesce(span_id, ''), coalesce(parent_span_id, ''), coalesce(async_of, '')`

func scanSpans(rows *sql.Rows) ([]eventgraph.Event, error) {
	defer func() { _ = rows.Close() }()
	var out []eventgraph.Event
	for rows.Next() {
		var e eventgraph.Event
		if err := rows.Scan(&e.ID, &e.Kind, &e.TraceID, &e.SpanID, &e.ParentSpanID, &e.AsyncOf); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// appendSpanEdges appends the CHILD_OF edges between the events and the
// related events, both ways, and the ASYNC_OF edges from related events into the events.
func appendSpanEdges(out []eventgraph.Edge, events, related []eventgraph.Event) []eventgraph.Edge {
	spans, children, detached := map[string][]string{}, map[string][]string{}, map[string][]string{}
	for i := range related {
		r := &related[i]
		if key := r.SpanKey(); key != "" {
			spans[key] = append(spans[key], r.ID)
		}
		if key := r.ParentKey(); key != "" {
			children[key] = append(children[key], r.ID)
		}
		if r.AsyncOf != "" {
			detached[r.AsyncOf] = append(detached[r.AsyncOf], r.ID)
		}
	}
	for i := range events {
		e := &events[i]
		if key := e.ParentKey(); key != "" {
			for _, p := range spans[key] {
				out = append(out, eventgraph.Edge{From: e.ID, To: p, Type: eventgraph.EdgeChildOf})
			}
		}
		if key := e.SpanKey(); key != "" {
			for _, c := range children[key] {
				out = append(out, eventgraph.Edge{From: c, To: e.ID, Type: eventgraph.EdgeChildOf})
			}
		}
		for _, d := range detached[e.ID] {
			out = append(out, eventgraph.Edge{From: d, To: e.ID, Type: eventgraph.EdgeAsyncOf})
		}
	}
	return out
}

// Requests returns the requests active in [from, to) whose outcome is failed.
func (s *Store) Requests(ctx context.Context, from, to time.Time, failed bool) ([]eventgraph.Request, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT req_id, failed, first_ns, last_ns FROM requests
		WHERE failed = ? AND last_ns >= ? AND first_ns < ? ORDER BY first_ns, req_id`, failed, from.UnixNano(), to.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: requests: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []eventgraph.Request
	for rows.Next() {
		var r eventgraph.Request
		var first, last int64
		if err := rows.Scan(&r.ReqID, &r.Failed, &first, &last); err != nil {
			return nil, fmt.Errorf("sqlitestore: requests: %w", err)
		}
		r.First, r.Last = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// dimensionEventsQuery reads the window's events of requests (their
// requests' outcomes are read apart: a join per event costs more). The
// attributes every event gives are columns; a request's symptoms and
// reasons are taken out of the JSON, and only from the events that show its
// failure (every failed request has one).
var dimensionEventsQuery = `SELECT e.req_id, e.time_ns, coalesce(e.end_ns, 0), e.failed,
	coalesce(e.severity_number, 0) >= ` + strconv.Itoa(eventgraph.ErrorSeverity) + ` OR coalesce(e.status, '') = 'error',
	e.model_ver, e.input_hash, e.service, e.host, e.gpu,
	e.adjusted_count, coalesce((SELECT list FROM dim_lists WHERE id = e.dim_list), e.dims),
	CASE WHEN e.failed THEN json_extract(e.attrs, '$."` + eventgraph.SymptomsAttr + `"') END,
	CASE WHEN e.failed THEN json_extract(e.attrs, '$."` + failure.ReasonsAttr + `"') END,
	CASE WHEN e.failed THEN (SELECT json_group_array(rule) FROM (SELECT DISTINCT rule FROM caused WHERE effect_id = e.event_id ORDER BY rule)) END
FROM events e
WHERE e.time_ns >= ? AND e.time_ns < ? AND e.req_id IS NOT NULL
LIMIT ?`

// DimensionEvents returns the events in [from, to) that belong to a request,
// at most limit. The window is read in slices side by side, one connection
// each: reading rows is most of a ranking's time. Each slice is counted on
// the time index first, so that all of them fill one slice allocated once:
// grown row by row and then joined, fresh memory took a third of the time
// (first touches of a page are dear on virtual machines).
func (s *Store) DimensionEvents(ctx context.Context, from, to time.Time, limit int) ([]eventgraph.DimensionEvent, bool, error) {
	n := min(runtime.GOMAXPROCS(0), maxReadConns)
	step := to.Sub(from) / time.Duration(n)
	if step <= 0 {
		n, step = 1, to.Sub(from)
	}
	bounds := make([]time.Time, n+1)
	for i := range n {
		bounds[i] = from.Add(time.Duration(i) * step)
	}
	bounds[n] = to
	counts, errs := make([]int, n), make([]error, n)
	sideBySide(n, func(i int) { counts[i], errs[i] = s.countEvents(ctx, bounds[i], bounds[i+1]) })
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	all := make([]eventgraph.DimensionEvent, 0, min(sum(counts), limit+1))
	parts := make([][]eventgraph.DimensionEvent, n)
	var failed []eventgraph.Request
	var failedErr error
	sideBySide(n+1, func(i int) {
		if i == n {
			failed, failedErr = s.Requests(ctx, from, to, true)
			return
		}
		start := min(sum(counts[:i]), cap(all))
		into := all[start:start:min(start+counts[i], cap(all))]
		parts[i], errs[i] = s.dimensionEvents(ctx, bounds[i], bounds[i+1], limit+1, into)
	})
	if err := errors.Join(append(errs, failedErr)...); err != nil {
		return nil, false, err
	}
	failing := make(map[string]bool, len(failed))
	for _, r := range failed {
		failing[r.ReqID] = true
	}
	// Rows of no request leave gaps between the parts: each moves down
	// (copy is a memmove) or, where rows came after the count, is appended.
	out := all[:0]
	for _, part := range parts {
		out = append(out, part...)
	}
	truncated := len(out) > limit
	if truncated {
		out = out[:limit]
	}
	for i := range out {
		e := &out[i]
		if e.RequestFailed = failing[e.ReqID]; !e.RequestFailed {
			e.Failure = nil
		}
	}
	return out, truncated, nil
}

// sideBySide runs f(0) … f(n-1) each in its own goroutine and waits for them.
func sideBySide(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

func sum(counts []int) int {
	total := 0
	for _, c := range counts {
		total += c
	}
	return total
}

// countEvents counts the events in [from, to) on the time index, those of no
// request included: an upper bound of what dimensionEvents reads.
func (s *Store) countEvents(ctx context.Context, from, to time.Time) (int, error) {
	var count int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE time_ns >= ? AND time_ns < ?`,
		from.UnixNano(), to.UnixNano()).Scan(&count); err != nil {
		return 0, fmt.Errorf("sqlitestore: count events: %w", err)
	}
	return count, nil
}

// dimensionEvents appends to out the events of requests in [from, to), at most limit.
func (s *Store) dimensionEvents(ctx context.Context, from, to time.Time, limit int, out []eventgraph.DimensionEvent) ([]eventgraph.DimensionEvent, error) {
	rows, err := s.reader.QueryContext(ctx, dimensionEventsQuery, from.UnixNano(), to.UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: dimension events: %w", err)
	}
	defer func() { _ = rows.Close() }()
	// A window repeats few values (services, hosts, lists of dimensions)
	// over many rows: each is made a string, or decoded, once.
	texts := map[string]string{}
	text := func(b sql.RawBytes) string {
		if t, ok := texts[string(b)]; ok {
			return t
		}
		t := string(b)
		texts[t] = t
		return t
	}
	lists := map[string][]string{}
	list := func(b sql.RawBytes) ([]string, error) {
		if l, ok := lists[string(b)]; ok || len(b) == 0 {
			return l, nil
		}
		l, err := stringList(string(b))
		lists[string(b)] = l
		return l, err
	}
	var reqID, model, input, service, host, gpu, dims, symptoms, reasons, causedBy sql.RawBytes
	for rows.Next() {
		var e eventgraph.DimensionEvent
		var weight sql.NullFloat64
		var at, end int64
		if err := rows.Scan(&reqID, &at, &end, &e.EventFailed, &e.ReportsError, &model, &input, &service, &host, &gpu,
			&weight, &dims, &symptoms, &reasons, &causedBy); err != nil {
			return nil, fmt.Errorf("sqlitestore: dimension events: %w", err)
		}
		e.ReqID, e.Time = text(reqID), time.Unix(0, at).UTC()
		if end != 0 {
			e.End = time.Unix(0, end).UTC()
		}
		e.ModelVer, e.InputHash = text(model), text(input)
		e.Service, e.Host, e.GPU = text(service), text(host), text(gpu)
		e.AdjustedCount = 1
		if weight.Valid && weight.Float64 >= 1 {
			e.AdjustedCount = weight.Float64
		}
		e.Dims, err = list(dims)
		if err == nil && e.EventFailed {
			e.Failure, err = eventFailure(list, symptoms, reasons, causedBy)
		}
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: dimension events of %q: %w", e.ReqID, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func eventFailure(list func(sql.RawBytes) ([]string, error), symptoms, reasons, causedBy sql.RawBytes) (*eventgraph.EventFailure, error) {
	var f eventgraph.EventFailure
	var err error
	if f.Symptoms, err = list(symptoms); err == nil {
		if f.Reasons, err = list(reasons); err == nil {
			f.CausedBy, err = list(causedBy)
		}
	}
	return &f, err
}

// stringList decodes a JSON list of strings that json_extract returned:
// minified, so a list without escapes splits on its quotes.
func stringList(text string) ([]string, error) {
	if text == "[]" {
		return nil, nil
	}
	if strings.HasPrefix(text, `["`) && strings.HasSuffix(text, `"]`) && !strings.ContainsRune(text, '\\') {
		return strings.Split(text[2:len(text)-2], `","`), nil
	}
	var list []string
	return list, json.Unmarshal([]byte(text), &list)
}

func scanEvents(rows *sql.Rows) ([]eventgraph.Event, error) {
	defer func() { _ = rows.Close() }()
	var out []eventgraph.Event
	for rows.Next() {
		var (
			e                                                eventgraph.Event
			kind                                             string
			timeNs                                           int64
			endNs, severity                                  sql.NullInt64
			reqID, stage, model, input, service, host, gpu   sql.NullString
			severityText, status, name, message              sql.NullString
			traceID, spanID, parentSpanID, asyncOf, attrsRaw sql.NullString
			dims                                             sql.NullString
			weight                                           sql.NullFloat64
		)
		if err := rows.Scan(&e.ID, &kind, &timeNs, &endNs, &reqID, &stage, &model, &input, &service, &host, &gpu,
			&severity, &severityText, &status, &e.Failed, &name, &message, &traceID, &spanID, &parentSpanID,
			&asyncOf, &attrsRaw, &dims, &weight); err != nil {
			return nil, fmt.Errorf("sqlitestore: read event: %w", err)
		}
		e.Kind = eventgraph.Kind(kind)
		e.Time = time.Unix(0, timeNs).UTC()
		if endNs.Valid {
			e.End = time.Unix(0, endNs.Int64).UTC()
		}
		e.ReqID, e.Stage, e.ModelVer, e.InputHash = reqID.String, stage.String, model.String, input.String
		e.Service, e.Host, e.GPU = service.String, host.String, gpu.String
		e.SeverityNumber = int32(severity.Int64)
		e.SeverityText, e.Status, e.Name, e.Message = severityText.String, status.String, name.String, message.String
		e.TraceID, e.SpanID, e.ParentSpanID, e.AsyncOf = traceID.String, spanID.String, parentSpanID.String, asyncOf.String
		if attrsRaw.Valid {
			attrs, err := decodeAttrs(attrsRaw.String)
			if err != nil {
				return nil, fmt.Errorf("sqlitestore: attributes of event %s: %w", e.ID, err)
			}
			e.Attrs = attrs
		}
		if err := readRankedFields(&e, dims, weight); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// readRankedFields sets the event's Dims and AdjustedCount from their
// columns or, where a column is NULL on an event written before it existed
// (see addRankedColumns), from its attributes, which then hold them no more.
func readRankedFields(e *eventgraph.Event, dims sql.NullString, weight sql.NullFloat64) error {
	if list, ok := e.Attrs[eventgraph.DimsAttr].([]string); ok {
		e.Dims = list
		delete(e.Attrs, eventgraph.DimsAttr)
	}
	if count, ok := e.Attrs[golden.SamplingAdjustedCount].(float64); ok {
		e.AdjustedCount = count
		delete(e.Attrs, golden.SamplingAdjustedCount)
	}
	if len(e.Attrs) == 0 {
		e.Attrs = nil
	}
	if dims.Valid {
		list, err := stringList(dims.String)
		if err != nil {
			return fmt.Errorf("sqlitestore: dimensions of event %s: %w", e.ID, err)
		}
		e.Dims = list
	}
	if weight.Valid {
		e.AdjustedCount = weight.Float64
	}
	return nil
}

// decodeAttrs restores the model's value types: JSON numbers are float64 and
// string arrays []string, as the writer's attributes were.
func decodeAttrs(raw string) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, err
	}
	for k, v := range m {
		if list, ok := v.([]any); ok {
			strs := make([]string, len(list))
			for i, x := range list {
				strs[i] = fmt.Sprint(x)
			}
			m[k] = strs
		}
	}
	return m, nil
}

func chunks(ids []string) func(yield func([]any) bool) {
	return func(yield func([]any) bool) {
		for start := 0; start < len(ids); start += maxIn {
			end := min(start+maxIn, len(ids))
			chunk := make([]any, end-start)
			for i, id := range ids[start:end] {
				chunk[i] = id
			}
			if !yield(chunk) {
				return
			}
		}
	}
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
