package neo4jstore

import (
	"context"
	"fmt"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/golden"
)

// writeEvents merges the events, their membership edges and the edges their
// records declare (CAUSED, ASYNC_OF). Optional values arrive as lists of zero
// or one element, so that FOREACH skips what is absent.
var writeEvents = func() string {
	q := `UNWIND $rows AS row
MERGE (e:Event {event_id: row.id})
SET e += row.props
FOREACH (v IN row.req | MERGE (r:Request {req_id: v}) MERGE (e)-[:IN_REQUEST]->(r))
`
	for _, d := range dimensions {
		q += `FOREACH (v IN row.` + string(d.dim) + ` | MERGE (d:` + string(d.dim) + ` {` + d.key + `: v}) MERGE (e)-[:` + d.edge + `]->(d))
`
	}
	return q + `FOREACH (c IN row.causes | MERGE (x:Event {event_id: c.id}) MERGE (x)-[:CAUSED {type: c.type, rule: c.rule}]->(e))
FOREACH (v IN row.async_of | MERGE (root:Event {event_id: v}) MERGE (e)-[:ASYNC_OF]->(root))`
}()

// writeRequests merges the requests' outcome and time span; they only grow,
// so the merge is idempotent and independent of the order of batches.
const writeRequests = `UNWIND $rows AS q
MERGE (r:Request {req_id: q.req_id})
SET r.failed = coalesce(r.failed, false) OR q.failed,
    r.first_time = CASE WHEN r.first_time IS NULL OR q.first < r.first_time THEN q.first ELSE r.first_time END,
    r.last_time = CASE WHEN r.last_time IS NULL OR q.last > r.last_time THEN q.last ELSE r.last_time END`

// CHILD_OF edges join spans by trace and span id, whichever of parent and
// child arrives first: each new event links to its parent and its children.
const (
	linkParents = `UNWIND $rows AS row
MATCH (e:Event {event_id: row.id})
MATCH (p:Event {span_key: row.parent_key})
MERGE (e)-[:CHILD_OF]->(p)`
	linkChildren = `UNWIND $rows AS row
MATCH (p:Event {event_id: row.id})
MATCH (c:Event {parent_key: row.span_key})
MERGE (c)-[:CHILD_OF]->(p)`
)

// NEXT edges chain a request's events in (time, event_id) order. A new event
// links to its predecessor and successor, and the edges that used to bridge
// it are removed: after any sequence of writes the chain is the one the full
// set of events defines. Two events never share a predecessor, so the rows of
// one statement do not interfere.
const (
	linkPredecessor = `UNWIND $rows AS row
MATCH (e:Event {event_id: row.id})
CALL {
  WITH e
  MATCH (p:Event {req_id: e.req_id})
  WHERE p.time < e.time OR (p.time = e.time AND p.event_id < e.event_id)
  RETURN p ORDER BY p.time DESC, p.event_id DESC LIMIT 1
}
OPTIONAL MATCH (p)-[old:NEXT]->(x) WHERE x <> e
DELETE old
WITH DISTINCT p, e
MERGE (p)-[:NEXT]->(e)`
	linkSuccessor = `UNWIND $rows AS row
MATCH (e:Event {event_id: row.id})
CALL {
  WITH e
  MATCH (n:Event {req_id: e.req_id})
  WHERE n.time > e.time OR (n.time = e.time AND n.event_id > e.event_id)
  RETURN n ORDER BY n.time, n.event_id LIMIT 1
}
OPTIONAL MATCH (x)-[old:NEXT]->(n) WHERE x <> e
DELETE old
WITH DISTINCT n, e
MERGE (e)-[:NEXT]->(n)`
)

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

// readOwners returns the req_id of the events among ids that a request holds.
const readOwners = `UNWIND $ids AS id
MATCH (e:Event {event_id: id}) WHERE e.req_id IS NOT NULL
RETURN e.event_id, e.req_id`

// refuseOwnedElsewhere returns the positions of the events that would take
// over an event another request holds, in the store or earlier in the batch.
func refuseOwnedElsewhere(ctx context.Context, tx neo4j.ManagedTransaction, events []eventgraph.Event) (refused []int, err error) {
	ids := make([]any, len(events))
	for i := range events {
		ids[i] = events[i].ID
	}
	res, err := tx.Run(ctx, readOwners, map[string]any{"ids": ids})
	if err != nil {
		return nil, err
	}
	records, err := res.Collect(ctx)
	if err != nil {
		return nil, err
	}
	owners := make(map[string]string, len(records))
	for _, r := range records {
		owners[str(r.Values[0])] = str(r.Values[1])
	}
	for i := range events {
		e := &events[i]
		if eventgraph.OwnedElsewhere(e, owners[e.ID]) {
			refused = append(refused, i)
		} else if owners[e.ID] == "" {
			owners[e.ID] = e.ReqID
		}
	}
	return refused, nil
}

// writeChunk writes the events that no other request holds, and returns the
// positions of the others.
func writeChunk(ctx context.Context, tx neo4j.ManagedTransaction, chunk []eventgraph.Event) ([]int, error) {
	refused, err := refuseOwnedElsewhere(ctx, tx, chunk)
	if err != nil {
		return nil, err
	}
	events := eventgraph.Without(chunk, refused)
	rows := make([]any, len(events))
	var parents, children, inRequest []any
	for i := range events {
		e := &events[i]
		rows[i] = eventRow(e)
		if key := e.ParentKey(); key != "" {
			parents = append(parents, map[string]any{"id": e.ID, "parent_key": key})
		}
		if key := e.SpanKey(); key != "" {
			children = append(children, map[string]any{"id": e.ID, "span_key": key})
		}
		if e.ReqID != "" {
			inRequest = append(inRequest, map[string]any{"id": e.ID})
		}
	}
	requests := eventgraph.Requests(events)
	reqRows := make([]any, len(requests))
	for i, r := range requests {
		reqRows[i] = map[string]any{"req_id": r.ReqID, "failed": r.Failed, "first": r.First.UTC(), "last": r.Last.UTC()}
	}
	for _, stmt := range []struct {
		query string
		rows  []any
	}{
		{writeEvents, rows},
		{writeRequests, reqRows},
		{linkParents, parents},
		{linkChildren, children},
		{linkPredecessor, inRequest},
		{linkSuccessor, inRequest},
	} {
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

func eventRow(e *eventgraph.Event) map[string]any {
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
	for k, v := range map[string]string{
		golden.ReqID: e.ReqID, golden.Stage: e.Stage, golden.ModelVer: e.ModelVer, golden.InputHash: e.InputHash,
		propService: e.Service, propHost: e.Host, propGPU: e.GPU,
		propSeverityText: e.SeverityText, propStatus: e.Status, propName: e.Name, propMessage: e.Message,
		golden.TraceID: e.TraceID, golden.SpanID: e.SpanID, propParentSpanID: e.ParentSpanID,
		propSpanKey: e.SpanKey(), propParentKey: e.ParentKey(),
	} {
		if v != "" {
			props[k] = v
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
	row := map[string]any{
		"id":       e.ID,
		"props":    props,
		"req":      optional(e.ReqID),
		"async_of": optional(e.AsyncOf),
	}
	for _, d := range dimensions {
		row[string(d.dim)] = optional(e.Value(d.dim))
	}
	causes := make([]any, len(e.Causes))
	for i, c := range e.Causes {
		causes[i] = map[string]any{"id": c.EventID, "type": c.Type, "rule": c.Rule}
	}
	row["causes"] = causes
	return row
}

func optional(v string) []any {
	if v == "" {
		return []any{}
	}
	return []any{v}
}
