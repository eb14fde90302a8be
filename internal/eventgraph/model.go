// Package eventgraph is the request event graph of ARCHITECTURE.md §5: the model
// that the eventgraph exporter writes and the rca extension reads, and the
// interfaces every store implements (sqlitestore embedded, neo4jstore on Bolt).
//
// Nodes are Events (one per log record or span, identified by event.id),
// Requests (one per req_id) and dimension values that failures can share
// (Model, InputHash, GPU, Service, Host). Event-to-event edges are NEXT (time
// order within a request), CHILD_OF (a span to its parent span, a log record to
// the span it was logged in), CAUSED (from causal.parents, cause to effect) and
// ASYNC_OF (detached work to its request's primary root span).
package eventgraph

import (
	"context"
	"time"
)

// Kind says whether an event is a log record or a span.
type Kind string

const (
	KindLog  Kind = "log"
	KindSpan Kind = "span"
)

// Event is one node of the graph: what a log record or span says about a request.
// Everything a store derives edges from is here, so a batch of events is all a
// store needs to write.
type Event struct {
	ID   string // event.id: 32 lowercase hex digits
	Kind Kind
	// Time is a log record's timestamp (observed time when unset) or a span's start.
	Time time.Time
	// End is a span's end; zero for log records.
	End time.Time

	ReqID, Stage, ModelVer, InputHash string
	Service, Host, GPU                string

	SeverityNumber int32  // log records
	SeverityText   string // log records
	Status         string // spans: unset, ok or error
	// Failed: the event shows its request's failure, by the failure model
	// (internal/failure): it reports one itself, or the request's verdict
	// names its place as the evidence.
	Failed bool
	// Message is a log record's body, Name a span's name.
	Message, Name string

	// TraceID and SpanID are lowercase hex: a span's own, or the span a log record was logged in.
	TraceID, SpanID string
	ParentSpanID    string // a span's parent; empty for roots and log records

	AsyncOf string  // stitch.async_of: the event.id of the primary root span, on detached work
	Causes  []Cause // causal.parents with causal.rules; stores return them sorted

	// Dims are the record's dimensions as DimsAttr names them; AdjustedCount
	// its sampling.adjusted_count, 0 where it had none. Root-cause ranking
	// reads both from every event of a window, so stores keep them apart
	// from Attrs, which hold neither.
	Dims          []string
	AdjustedCount float64

	// Attrs are the record's other golden facts: resource_usage.* numbers,
	// golden.valid, golden.missing, golden.invalid, golden.derived, the schema
	// drift mark, error.type and the request's failure reasons as text
	// (request.failure.reasons, on a failed request's records). Values are
	// float64, bool, string or []string. Their names always hold a dot, the
	// names of the fields above never do: stores may keep both side by side.
	Attrs map[string]any
}

// TruncatedAttr is the attribute that counts, on an event, the values the
// writer cut to its size bound (the stores' text limit, not the record's).
const TruncatedAttr = "eventgraph.truncated"

// FieldsAttr lists, on an event, the names of the attributes its record
// carried (not Loom's own; at most MaxFields, sorted): the values stay out of
// the graph, and a field one request's records carry and another's lack
// still shows.
const FieldsAttr = "eventgraph.fields"

// MaxFields bounds the names FieldsAttr lists.
const MaxFields = 64

// DimsAttr is the name of an event's Dims, where it shows as an attribute
// (a Neo4j property, the rca API): the record and resource attributes that
// are dimensions failures can share, as "name=value", the ones whose values
// stay few (a model, a region, a LoRA adapter; not an id or a count). At
// most MaxDims, sorted.
const DimsAttr = "eventgraph.dims"

// MaxDims bounds an event's Dims.
const MaxDims = 32

// KeyAttr is, on an event of a request that carries no req_id,
// golden.ReqIDFromTrace: the event's ReqID is the key of the trace that
// started its request (golden.TraceKey). Events of requests keyed by
// req_id lack it.
const KeyAttr = "eventgraph.key"

// SymptomsAttr lists, on a failed request's event, the attributes its failure
// reasons name (an error.type, a drifting outcome, the fields a schema drift
// lost): how the failure shows, never what caused it.
const SymptomsAttr = "eventgraph.symptoms"

// Cause is one causal.parents entry: the event that caused this one, by which rule.
type Cause struct {
	EventID string
	Type    string // the edge type the rule declares, e.g. triggered
	Rule    string // the rule's name, e.g. cache_miss_trigger_inference
}

// SpanKey identifies the span the event is (spans only): the target of its children's CHILD_OF edges.
func (e *Event) SpanKey() string {
	if e.Kind != KindSpan || e.TraceID == "" || e.SpanID == "" {
		return ""
	}
	return e.TraceID + "/" + e.SpanID
}

// ParentKey is the SpanKey of the span the event is a CHILD_OF: a span's parent,
// or the span a log record was logged in.
func (e *Event) ParentKey() string {
	parent := e.ParentSpanID
	if e.Kind == KindLog {
		parent = e.SpanID
	}
	if e.TraceID == "" || parent == "" {
		return ""
	}
	return e.TraceID + "/" + parent
}

// Request is a Request node: the outcome and time span of one req_id's events.
type Request struct {
	ReqID  string
	Failed bool
	// First and Last are the times of the request's first and last events.
	First, Last time.Time
}

// Requests folds the events into their requests, in order of first appearance.
// Folding is idempotent: stores merge these into what they hold with OR, min and max.
func Requests(events []Event) []Request {
	var out []Request
	index := map[string]int{}
	for i := range events {
		e := &events[i]
		if e.ReqID == "" {
			continue
		}
		last := e.Time
		if e.End.After(last) {
			last = e.End
		}
		j, ok := index[e.ReqID]
		if !ok {
			index[e.ReqID] = len(out)
			out = append(out, Request{ReqID: e.ReqID, Failed: e.Failed, First: e.Time, Last: last})
			continue
		}
		r := &out[j]
		r.Failed = r.Failed || e.Failed
		if e.Time.Before(r.First) {
			r.First = e.Time
		}
		if last.After(r.Last) {
			r.Last = last
		}
	}
	return out
}

// Dimension is a kind of value that failing requests can share; its name is the node label.
type Dimension string

const (
	DimModel     Dimension = "Model"
	DimInputHash Dimension = "InputHash"
	DimGPU       Dimension = "GPU"
	DimService   Dimension = "Service"
	DimHost      Dimension = "Host"
)

// Dimensions lists every dimension, in the order results report them.
var Dimensions = []Dimension{DimModel, DimInputHash, DimGPU, DimService, DimHost}

// Value returns the event's value of dimension d; empty when it has none.
func (e *Event) Value(d Dimension) string {
	switch d {
	case DimModel:
		return e.ModelVer
	case DimInputHash:
		return e.InputHash
	case DimGPU:
		return e.GPU
	case DimService:
		return e.Service
	case DimHost:
		return e.Host
	}
	return ""
}

// EdgeType names an edge between two events.
type EdgeType string

const (
	EdgeNext    EdgeType = "NEXT"
	EdgeChildOf EdgeType = "CHILD_OF"
	EdgeCaused  EdgeType = "CAUSED"
	EdgeAsyncOf EdgeType = "ASYNC_OF"
)

// Edge is a directed edge between two events; CAUSED edges carry their cause's type and rule.
type Edge struct {
	From, To string
	Type     EdgeType
	// CauseType and Rule are set on CAUSED edges only.
	CauseType, Rule string
}

// Graph is a set of events and the edges between them.
type Graph struct {
	Events []Event
	Edges  []Edge
	// Truncated: the traversal stopped at MaxNeighbourhood events.
	Truncated bool
}

// ErrorSeverity is the least log severity that reports an error (plog's ERROR).
const ErrorSeverity = 17

// ReportsError says whether the event reports an error itself: a log record
// at ErrorSeverity or above, a span with an error status.
func (e *Event) ReportsError() bool { return e.SeverityNumber >= ErrorSeverity || e.Status == "error" }

// DimensionEvent is one event as root-cause ranking reads it: its request and
// that request's outcome, the sampling weight, and every dimension value the
// event carries.
type DimensionEvent struct {
	ReqID string
	// Time is a log record's time or a span's start; End a span's end.
	Time, End time.Time
	// RequestFailed is the outcome of the event's request; EventFailed that
	// the event itself shows the failure; ReportsError that it says so
	// itself (a log record at error severity or above, a span with an error
	// status).
	RequestFailed, EventFailed, ReportsError bool
	// AdjustedCount is the requests the event's request stands for
	// (sampling.adjusted_count; 1 where the record had none).
	AdjustedCount float64

	ModelVer, InputHash, Service, Host, GPU string
	// Dims are the event's other low-cardinality attributes (Event.Dims).
	// Stores may share them between events: read them, never change them.
	Dims []string
	// Failure is what the event tells of its request's failure when it
	// shows it (EventFailed, of a failed request), else nil: few events
	// have one, and a window holds hundreds of thousands of events.
	Failure *EventFailure
}

// EventFailure is what an event that shows its request's failure tells of
// it. Stores may share its lists between events: read them, never change them.
type EventFailure struct {
	// Symptoms are the attributes its request's failure reasons name
	// (SymptomsAttr); Reasons those reasons, as text; CausedBy the rules of
	// the CAUSED edges into the event.
	Symptoms, Reasons, CausedBy []string
}

// Store is the read side of the graph, the same on every backend.
type Store interface {
	// Timeline returns the request's events in time order (ties by event id).
	Timeline(ctx context.Context, reqID string) ([]Event, error)
	// Neighbourhood returns the events within depth event-to-event edges of the
	// event, edges followed both ways, and the edges between them. Dimension
	// nodes are not crossed: every event of a service would be one hop away.
	Neighbourhood(ctx context.Context, eventID string, depth int) (Graph, error)
	// Requests returns the requests active in [from, to) that failed (failed
	// true) or did not, by first event time.
	Requests(ctx context.Context, from, to time.Time, failed bool) ([]Request, error)
	// SchemaDrifts returns the schema drift findings in [from, to), in time
	// order: the events of no request that carry the drift mark (the
	// schema.drift log records goldenfield writes when a model version
	// stops writing fields its predecessor wrote).
	SchemaDrifts(ctx context.Context, from, to time.Time) ([]Event, error)
	// DimensionEvents returns the events in [from, to) that belong to a
	// request, at most limit of them (truncated when there were more).
	DimensionEvents(ctx context.Context, from, to time.Time, limit int) (events []DimensionEvent, truncated bool, err error)
}

// Writer is the write side: every write is an idempotent upsert keyed by
// event.id, so retries and replays never duplicate nodes or edges.
type Writer interface {
	Write(ctx context.Context, events []Event) error
	Close(ctx context.Context) error
}

// RejectFunc is told of each event a store refused to write. An event whose
// id is held by a request is written again only by a record of that
// request: a record cannot take over another request's event (an event
// stored with no request may still be given one, as late stitching does).
// The refused record's causes are not written either.
type RejectFunc func(Event)

// OwnedElsewhere reports whether writing e would take over an event that
// owner's request holds: owner is the stored event's req_id, "" for none.
func OwnedElsewhere(e *Event, owner string) bool { return owner != "" && owner != e.ReqID }

// Without returns the events less those at the positions refused (in
// increasing order): events itself when none is, else a copy.
func Without(events []Event, refused []int) []Event {
	if len(refused) == 0 {
		return events
	}
	out := make([]Event, 0, len(events)-len(refused))
	next := 0
	for i := range events {
		if next < len(refused) && refused[next] == i {
			next++
			continue
		}
		out = append(out, events[i])
	}
	return out
}

// Backend is a store that can be written and read.
type Backend interface {
	Store
	Writer
}
