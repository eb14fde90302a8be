package neo4jstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/golden"
)

// Every write statement is one UNWIND over rows of one kind, each row a list
// of values, so that a batch is a few statements whatever its size and the
// server plans each statement once.
const (
	// writeRequests merges the requests' outcome and time span; they only
	// grow, so the merge is idempotent and independent of the order of batches.
	writeRequests = `UNWIND $rows AS row
MERGE (r:Request {req_id: row[0]})
SET r.failed = coalesce(r.failed, false) OR row[1],
    r.first_time = CASE WHEN r.first_time IS NULL OR row[2] < r.first_time THEN row[2] ELSE r.first_time END,
    r.last_time = CASE WHEN r.last_time IS NULL OR row[3] > r.last_time THEN row[3] ELSE r.last_time END`
	// linkCauses merges one CAUSED edge per row (effect, cause, type, rule),
	// the cause a placeholder until its record arrives.
	linkCauses = `UNWIND $rows AS row
MATCH (e:Event {event_id: row[0]})
MERGE (c:Event {event_id: row[1]})
MERGE (c)-[:CAUSED {type: row[2], rule: row[3]}]->(e)`
	// linkAsyncRoots merges one ASYNC_OF edge per row (detached event, root).
	linkAsyncRoots = `UNWIND $rows AS row
MATCH (e:Event {event_id: row[0]})
MERGE (root:Event {event_id: row[1]})
MERGE (e)-[:ASYNC_OF]->(root)`
)

// membership is an Event's edge to a node it shares with other events: its
// Request, its dimension values.
type membership struct {
	label, key, edge string
	value            func(*eventgraph.Event) string
}

var memberships = func() []membership {
	out := []membership{{label: "Request", key: golden.ReqID, edge: "IN_REQUEST",
		value: func(e *eventgraph.Event) string { return e.ReqID }}}
	for _, d := range dimensions {
		out = append(out, membership{label: string(d.dim), key: d.key, edge: d.edge,
			value: func(e *eventgraph.Event) string { return e.Value(d.dim) }})
	}
	return out
}()

// writeEvents merges the events' nodes, their properties and their
// membership edges (rows: event_id, properties, then one value per
// membership, null when the event has none): merging the edges with the node
// saves finding each event again per kind of edge.
var writeEvents = func() string {
	var b strings.Builder
	b.WriteString(`UNWIND $rows AS row
MERGE (e:Event {event_id: row[0]})
SET e += row[1]`)
	for i, m := range memberships {
		fmt.Fprintf(&b, `
FOREACH (v IN CASE WHEN row[%d] IS NULL THEN [] ELSE [row[%d]] END |
  MERGE (d:%s {%s: v}) MERGE (e)-[:%s]->(d))`, i+2, i+2, m.label, m.key, m.edge)
	}
	return b.String()
}()

// CHILD_OF edges join spans by trace and span id, whichever of parent and
// child arrives first: each new event links to its parent (rows: event_id,
// parent_key) and its children (rows: event_id, span_key).
const (
	linkParents = `UNWIND $rows AS row
MATCH (e:Event {event_id: row[0]})
MATCH (p:Event {span_key: row[1]})
MERGE (e)-[:CHILD_OF]->(p)`
	linkChildren = `UNWIND $rows AS row
MATCH (p:Event {event_id: row[0]})
MATCH (c:Event {parent_key: row[1]})
MERGE (c)-[:CHILD_OF]->(p)`
)

// linkNext chains a request's events in (time, event_id) order. A row is a
// request and the span of times its batch touched (req_id, first, last: the
// batch's events' times, new and stored). Only the segment from the last
// event before first to the first event after last can change: it is read
// through the (req_id, time) index, its events are linked in order, and the
// NEXT edges that no longer join neighbours are removed (the request's last
// event keeps none; the one after the segment keeps its own). After any sequence
// of writes the chain is the one the full set of events defines, and a batch
// costs what its segments hold, not what its requests hold.
const linkNext = `UNWIND $rows AS row
CALL {
  WITH row
  MATCH (e:Event {req_id: row[0]}) WHERE e.time < row[1]
  RETURN e ORDER BY e.time DESC, e.event_id DESC LIMIT 1
  UNION ALL
  WITH row
  MATCH (e:Event {req_id: row[0]}) WHERE e.time >= row[1] AND e.time <= row[2]
  RETURN e
  UNION ALL
  WITH row
  MATCH (e:Event {req_id: row[0]}) WHERE e.time > row[2]
  RETURN e ORDER BY e.time, e.event_id LIMIT 1
}
WITH row, e ORDER BY e.time, e.event_id
WITH row, collect(e) AS segment
UNWIND range(0, size(segment) - 1) AS i
WITH segment[i] AS e, segment[i + 1] AS successor, row[2] AS last
OPTIONAL MATCH (e)-[old:NEXT]->(x) WHERE x <> successor OR (successor IS NULL AND e.time <= last)
DELETE old
WITH DISTINCT e, successor WHERE successor IS NOT NULL
MERGE (e)-[:NEXT]->(successor)`

// Write merges the events in transactions of at most MaxRows events.
func (s *Store) Write(ctx context.Context, events []eventgraph.Event) error {
	if err := s.EnsureSchema(ctx); err != nil {
		return err
	}
	session := s.session(ctx, neo4j.AccessModeWrite)
	defer func() { _ = session.Close(ctx) }()
	for start := 0; start < len(events); start += s.maxRows {
		chunk := events[start:min(start+s.maxRows, len(events))]
		refused, err := session.ExecuteWrite(ctx, func(tx neo4j.ManagedTransaction) (any, error) {
			return writeChunk(ctx, tx, chunk)
		})
		if err != nil {
			return classify(fmt.Errorf("neo4jstore: write: %w", err))
		}
		if s.onReject != nil {
			for _, i := range refused.([]int) {
				s.onReject(chunk[i])
			}
		}
	}
	return nil
}

// readStored returns the request and time of the events among ids that a request holds.
const readStored = `UNWIND $ids AS id
MATCH (e:Event {event_id: id}) WHERE e.req_id IS NOT NULL
RETURN e.event_id, e.req_id, e.time`

// storedEvent is what the store holds of an event of the batch.
type storedEvent struct {
	reqID string
	time  time.Time
}

// readOwners returns what the store holds of the chunk's events that a request holds.
func readOwners(ctx context.Context, tx neo4j.ManagedTransaction, events []eventgraph.Event) (map[string]storedEvent, error) {
	ids := make([]string, len(events))
	for i := range events {
		ids[i] = events[i].ID
	}
	res, err := tx.Run(ctx, readStored, map[string]any{"ids": ids})
	if err != nil {
		return nil, err
	}
	records, err := res.Collect(ctx)
	if err != nil {
		return nil, err
	}
	stored := make(map[string]storedEvent, len(records))
	for _, r := range records {
		stored[str(r.Values[0])] = storedEvent{reqID: str(r.Values[1]), time: utc(r.Values[2])}
	}
	return stored, nil
}

// refuseOwnedElsewhere returns the positions of the events that would take
// over an event another request holds, in the store or earlier in the batch.
func refuseOwnedElsewhere(events []eventgraph.Event, stored map[string]storedEvent) (refused []int) {
	claimed := map[string]string{} // by the batch's earlier events, of ids the store does not hold
	for i := range events {
		e := &events[i]
		owner := stored[e.ID].reqID
		if owner == "" {
			owner = claimed[e.ID]
		}
		if eventgraph.OwnedElsewhere(e, owner) {
			refused = append(refused, i)
		} else if owner == "" {
			claimed[e.ID] = e.ReqID
		}
	}
	return refused
}

// writeChunk writes the events that no other request holds, and returns the
// positions of the others.
func writeChunk(ctx context.Context, tx neo4j.ManagedTransaction, chunk []eventgraph.Event) ([]int, error) {
	stored, err := readOwners(ctx, tx, chunk)
	if err != nil {
		return nil, err
	}
	refused := refuseOwnedElsewhere(chunk, stored)
	for _, stmt := range statements(eventgraph.Without(chunk, refused), stored) {
		if len(stmt.rows) == 0 {
			continue
		}
		res, err := tx.Run(ctx, stmt.query, map[string]any{"rows": stmt.rows})
		if err != nil {
			return nil, err
		}
		if _, err := res.Consume(ctx); err != nil {
			return nil, err
		}
	}
	return refused, nil
}

type statement struct {
	query string
	rows  []any
}

// statements are the writes of the events, in the order they run: nodes
// before the edges that match them.
func statements(events []eventgraph.Event, stored map[string]storedEvent) []statement {
	rows := make([]any, len(events))
	var causes, asyncRoots, parents, children []any
	for i := range events {
		e := &events[i]
		row := make([]any, 2, 2+len(memberships))
		row[0], row[1] = e.ID, eventProperties(e)
		for _, m := range memberships {
			var value any // null: no edge
			if v := m.value(e); v != "" {
				value = v
			}
			row = append(row, value)
		}
		rows[i] = row
		for _, c := range e.Causes {
			causes = append(causes, []string{e.ID, c.EventID, c.Type, c.Rule})
		}
		if e.AsyncOf != "" {
			asyncRoots = append(asyncRoots, []string{e.ID, e.AsyncOf})
		}
		if key := e.ParentKey(); key != "" {
			parents = append(parents, []string{e.ID, key})
		}
		if key := e.SpanKey(); key != "" {
			children = append(children, []string{e.ID, key})
		}
	}
	requests := eventgraph.Requests(events)
	requestRows := make([]any, len(requests))
	for i, r := range requests {
		requestRows[i] = []any{r.ReqID, r.Failed, r.First.UTC(), r.Last.UTC()}
	}
	return []statement{
		{writeEvents, rows},
		{writeRequests, requestRows},
		{linkCauses, causes},
		{linkAsyncRoots, asyncRoots},
		{linkParents, parents},
		{linkChildren, children},
		{linkNext, segments(events, stored)},
	}
}

// segments returns, per request of the events, the span of times whose
// chain the write changes: the events' new times and the ones stored, which
// an event written again with another time leaves.
func segments(events []eventgraph.Event, stored map[string]storedEvent) []any {
	type span struct{ first, last time.Time }
	spans := map[string]*span{}
	var order []string
	for i := range events {
		e := &events[i]
		if e.ReqID == "" {
			continue
		}
		sp := spans[e.ReqID]
		if sp == nil {
			sp = &span{first: e.Time, last: e.Time}
			spans[e.ReqID] = sp
			order = append(order, e.ReqID)
		}
		for _, t := range []time.Time{e.Time, stored[e.ID].time} {
			if t.IsZero() {
				continue
			}
			if t.Before(sp.first) {
				sp.first = t
			}
			if t.After(sp.last) {
				sp.last = t
			}
		}
	}
	rows := make([]any, len(order))
	for i, req := range order {
		rows[i] = []any{req, spans[req].first.UTC(), spans[req].last.UTC()}
	}
	return rows
}

// Event node properties besides the attributes (which keep their dotted names).
const (
	propEventID        = "event_id"
	propKind           = "kind"
	propTime           = "time"
	propEndTime        = "end_time"
	propService        = "service"
	propHost           = "host"
	propGPU            = "gpu"
	propSeverityNumber = "severity_number"
	propSeverityText   = "severity_text"
	propStatus         = "status"
	propFailed         = "failed"
	propName           = "name"
	propMessage        = "message"
	propParentSpanID   = "parent_span_id"
	propSpanKey        = "span_key"
	propParentKey      = "parent_key"
	// Dims and AdjustedCount keep the names they have as attributes: graphs
	// written before they were fields read the same.
	propDims          = eventgraph.DimsAttr
	propAdjustedCount = golden.SamplingAdjustedCount
)

// eventProperties are the Event node's properties: the fields that are set and the attributes.
func eventProperties(e *eventgraph.Event) map[string]any {
	props := make(map[string]any, 16+len(e.Attrs))
	props[propKind] = string(e.Kind)
	props[propTime] = e.Time.UTC()
	props[propFailed] = e.Failed
	if !e.End.IsZero() {
		props[propEndTime] = e.End.UTC()
	}
	if e.Kind == eventgraph.KindLog {
		props[propSeverityNumber] = int64(e.SeverityNumber)
	}
	for _, f := range [...]struct{ name, value string }{
		{golden.ReqID, e.ReqID}, {golden.Stage, e.Stage}, {golden.ModelVer, e.ModelVer}, {golden.InputHash, e.InputHash},
		{propService, e.Service}, {propHost, e.Host}, {propGPU, e.GPU},
		{propSeverityText, e.SeverityText}, {propStatus, e.Status}, {propName, e.Name}, {propMessage, e.Message},
		{golden.TraceID, e.TraceID}, {golden.SpanID, e.SpanID}, {propParentSpanID, e.ParentSpanID},
		{propSpanKey, e.SpanKey()}, {propParentKey, e.ParentKey()},
	} {
		if f.value != "" {
			props[f.name] = f.value
		}
	}
	for k, v := range e.Attrs {
		props[k] = v
	}
	if len(e.Dims) > 0 {
		props[propDims] = e.Dims
	}
	if e.AdjustedCount != 0 {
		props[propAdjustedCount] = e.AdjustedCount
	}
	return props
}
