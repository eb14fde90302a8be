package neo4jstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
)

// eventProjection returns an Event node e with its causes and async root.
const eventProjection = `RETURN properties(e) AS props,
  [(c:Event)-[r:CAUSED]->(e) | [c.event_id, r.type, r.rule]] AS causes,
  [(e)-[:ASYNC_OF]->(a) | a.event_id] AS async_of`

const (
	timelineQuery = `MATCH (e:Event {req_id: $req_id})
` + eventProjection + `
ORDER BY e.time, e.event_id`
	eventsQuery = `UNWIND $ids AS id
MATCH (e:Event {event_id: id}) WHERE e.time IS NOT NULL
` + eventProjection
	adjacentQuery = `UNWIND $ids AS id
MATCH (a:Event {event_id: id})-[r:NEXT|CHILD_OF|CAUSED|ASYNC_OF]-(b:Event)
WHERE b.time IS NOT NULL
RETURN type(r) AS type, startNode(r).event_id AS from, endNode(r).event_id AS to,
  coalesce(r.type, '') AS cause_type, coalesce(r.rule, '') AS rule`
	schemaDriftsQuery = `MATCH (e:Event) WHERE e.time >= $from AND e.time < $to AND e.req_id IS NULL
  AND e.` + "`" + golden.DriftOldModelVer + "`" + ` IS NOT NULL
` + eventProjection + `
ORDER BY e.time, e.event_id`
	requestsQuery = `MATCH (r:Request) WHERE coalesce(r.failed, false) = $failed AND r.last_time >= $from AND r.first_time < $to
RETURN r.req_id AS req_id, r.first_time AS first, r.last_time AS last
ORDER BY r.first_time, r.req_id`
)

// dimensionEventsQuery reads the window's events of requests with their
// request's outcome, through the event time index.
var dimensionEventsQuery = `MATCH (e:Event) WHERE e.time >= $from AND e.time < $to AND e.req_id IS NOT NULL
OPTIONAL MATCH (r:Request {req_id: e.req_id})
RETURN e.req_id, e.time, e.end_time, coalesce(r.failed, false), coalesce(e.failed, false),
  coalesce(e.severity_number, 0) >= ` + strconv.Itoa(eventgraph.ErrorSeverity) + ` OR coalesce(e.` + propStatus + `, '') = 'error',
  e.` + golden.ModelVer + `, e.` + golden.InputHash + `,
  e.` + propService + `, e.` + propHost + `, e.` + propGPU + `,
  e.` + "`" + propAdjustedCount + "`" + `, e.` + "`" + propDims + "`" + `,
  CASE WHEN e.failed THEN e.` + "`" + eventgraph.SymptomsAttr + "`" + ` END,
  CASE WHEN e.failed AND r.failed THEN e.` + "`" + failure.ReasonsAttr + "`" + ` END,
  CASE WHEN e.failed AND r.failed THEN [(:Event)-[x:CAUSED]->(e) | x.rule] END
LIMIT $limit`

func (s *Store) read(ctx context.Context, query string, params map[string]any) ([]*neo4j.Record, error) {
	res, err := neo4j.ExecuteQuery(ctx, s.driver, query, params, neo4j.EagerResultTransformer,
		neo4j.ExecuteQueryWithDatabase(s.database), neo4j.ExecuteQueryWithReadersRouting())
	if err != nil {
		return nil, classify(fmt.Errorf("neo4jstore: read: %w", err))
	}
	return res.Records, nil
}

// Timeline returns the request's events in time order, with their causes.
func (s *Store) Timeline(ctx context.Context, reqID string) ([]eventgraph.Event, error) {
	records, err := s.read(ctx, timelineQuery, map[string]any{"req_id": reqID})
	if err != nil {
		return nil, err
	}
	return toEvents(records)
}

// Events returns the stored events among ids, with their causes.
func (s *Store) Events(ctx context.Context, ids []string) ([]eventgraph.Event, error) {
	records, err := s.read(ctx, eventsQuery, map[string]any{"ids": ids})
	if err != nil {
		return nil, err
	}
	return toEvents(records)
}

// Neighbourhood returns the events within depth edges of the event (see eventgraph.Store).
func (s *Store) Neighbourhood(ctx context.Context, eventID string, depth int) (eventgraph.Graph, error) {
	return eventgraph.Traverse(ctx, s, eventID, depth)
}

// Adjacent returns the edges that touch the given events (see eventgraph.Adjacency).
func (s *Store) Adjacent(ctx context.Context, ids []string) ([]eventgraph.Edge, error) {
	records, err := s.read(ctx, adjacentQuery, map[string]any{"ids": ids})
	if err != nil {
		return nil, err
	}
	out := make([]eventgraph.Edge, len(records))
	for i, r := range records {
		out[i] = eventgraph.Edge{
			Type: eventgraph.EdgeType(str(r.Values[0])), From: str(r.Values[1]), To: str(r.Values[2]),
			CauseType: str(r.Values[3]), Rule: str(r.Values[4]),
		}
	}
	return out, nil
}

// Requests returns the requests active in [from, to) whose outcome is failed.
func (s *Store) Requests(ctx context.Context, from, to time.Time, failed bool) ([]eventgraph.Request, error) {
	records, err := s.read(ctx, requestsQuery, map[string]any{"from": from.UTC(), "to": to.UTC(), "failed": failed})
	if err != nil {
		return nil, err
	}
	out := make([]eventgraph.Request, len(records))
	for i, r := range records {
		out[i] = eventgraph.Request{ReqID: str(r.Values[0]), Failed: failed, First: utc(r.Values[1]), Last: utc(r.Values[2])}
	}
	return out, nil
}

// SchemaDrifts returns the drift findings in [from, to), in time order.
func (s *Store) SchemaDrifts(ctx context.Context, from, to time.Time) ([]eventgraph.Event, error) {
	records, err := s.read(ctx, schemaDriftsQuery, map[string]any{"from": from.UTC(), "to": to.UTC()})
	if err != nil {
		return nil, err
	}
	return toEvents(records)
}

// DimensionEvents returns the events in [from, to) that belong to a request, at most limit.
func (s *Store) DimensionEvents(ctx context.Context, from, to time.Time, limit int) ([]eventgraph.DimensionEvent, bool, error) {
	records, err := s.read(ctx, dimensionEventsQuery, map[string]any{"from": from.UTC(), "to": to.UTC(), "limit": limit + 1})
	if err != nil {
		return nil, false, err
	}
	truncated := len(records) > limit
	if truncated {
		records = records[:limit]
	}
	out := make([]eventgraph.DimensionEvent, len(records))
	for i, r := range records {
		v := r.Values
		e := &out[i]
		e.ReqID, e.Time, e.End = str(v[0]), utc(v[1]), utc(v[2])
		e.RequestFailed, _ = v[3].(bool)
		e.EventFailed, _ = v[4].(bool)
		e.ReportsError, _ = v[5].(bool)
		e.ModelVer, e.InputHash, e.Service, e.Host, e.GPU = str(v[6]), str(v[7]), str(v[8]), str(v[9]), str(v[10])
		e.AdjustedCount = 1
		if w, ok := v[11].(float64); ok && w >= 1 {
			e.AdjustedCount = w
		}
		e.Dims = strs(v[12])
		if e.EventFailed && e.RequestFailed {
			e.Failure = &eventgraph.EventFailure{Symptoms: strs(v[13]), Reasons: strs(v[14])}
			if rules := strs(v[15]); len(rules) > 0 {
				slices.Sort(rules)
				e.Failure.CausedBy = slices.Compact(rules)
			}
		}
	}
	return out, truncated, nil
}

// strs reads a list property of strings; nil when it is absent.
func strs(v any) []string {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = str(x)
	}
	return out
}

func toEvents(records []*neo4j.Record) ([]eventgraph.Event, error) {
	out := make([]eventgraph.Event, 0, len(records))
	for _, r := range records {
		props, ok := r.Values[0].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("neo4jstore: unexpected event properties %T", r.Values[0])
		}
		e := toEvent(props)
		for _, c := range r.Values[1].([]any) {
			triple := c.([]any)
			e.Causes = append(e.Causes, eventgraph.Cause{EventID: str(triple[0]), Type: str(triple[1]), Rule: str(triple[2])})
		}
		slices.SortFunc(e.Causes, func(x, y eventgraph.Cause) int {
			return cmp.Or(cmp.Compare(x.EventID, y.EventID), cmp.Compare(x.Type, y.Type), cmp.Compare(x.Rule, y.Rule))
		})
		if roots := r.Values[2].([]any); len(roots) > 0 {
			e.AsyncOf = str(roots[0])
		}
		out = append(out, e)
	}
	return out, nil
}

// toEvent reads an Event node's properties; the ones that are not fields are attributes.
func toEvent(props map[string]any) eventgraph.Event {
	e := eventgraph.Event{
		ID:           str(props[propEventID]),
		Kind:         eventgraph.Kind(str(props[propKind])),
		Time:         utc(props[propTime]),
		End:          utc(props[propEndTime]),
		ReqID:        str(props[golden.ReqID]),
		Stage:        str(props[golden.Stage]),
		ModelVer:     str(props[golden.ModelVer]),
		InputHash:    str(props[golden.InputHash]),
		Service:      str(props[propService]),
		Host:         str(props[propHost]),
		GPU:          str(props[propGPU]),
		SeverityText: str(props[propSeverityText]),
		Status:       str(props[propStatus]),
		Name:         str(props[propName]),
		Message:      str(props[propMessage]),
		TraceID:      str(props[golden.TraceID]),
		SpanID:       str(props[golden.SpanID]),
		ParentSpanID: str(props[propParentSpanID]),
	}
	e.Failed, _ = props[propFailed].(bool)
	if n, ok := props[propSeverityNumber].(int64); ok {
		e.SeverityNumber = int32(n)
	}
	e.Dims = strs(props[propDims])
	e.AdjustedCount, _ = props[propAdjustedCount].(float64)
	for k, v := range props {
		if !isAttr(k) || k == propDims || k == propAdjustedCount {
			continue
		}
		if e.Attrs == nil {
			e.Attrs = map[string]any{}
		}
		if _, ok := v.([]any); ok {
			v = strs(v)
		}
		e.Attrs[k] = v
	}
	return e
}

// isAttr reports whether an Event property holds an attribute: attribute
// names are dotted (resource_usage.*, golden.*, error.type), field names never are.
func isAttr(name string) bool { return strings.Contains(name, ".") }

func str(v any) string {
	s, _ := v.(string)
	return s
}

func utc(v any) time.Time {
	t, ok := v.(time.Time)
	if !ok {
		return time.Time{}
	}
	return t.UTC()
}
