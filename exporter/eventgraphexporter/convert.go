package eventgraphexporter

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/extract"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
)

// convStats counts what the conversion of one batch repaired or left out.
type convStats struct {
	idsComputed, truncated, sanitized, invalidRefs, edges int
}

func (s *convStats) add(o convStats) {
	s.idsComputed += o.idsComputed
	s.truncated += o.truncated
	s.sanitized += o.sanitized
	s.invalidRefs += o.invalidRefs
	s.edges += o.edges
}

// converter turns log records and spans into graph events. The same pdata
// gives the same events, but for the dimension values it lists: an attribute
// stops being listed once it has shown too many values to be a dimension.
type converter struct {
	maxBytes int
	dims     *dimensionTracker
}

func newConverter(maxBytes int) converter {
	return converter{maxBytes: maxBytes, dims: newDimensionTracker()}
}

func (c converter) logs(ld plog.Logs) ([]eventgraph.Event, convStats) {
	events := make([]eventgraph.Event, 0, ld.LogRecordCount())
	var st convStats
	for _, rl := range ld.ResourceLogs().All() {
		res := rl.Resource()
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				r := record{conv: c}
				e := &r.event
				e.Kind = eventgraph.KindLog
				e.ID = r.eventID(lr.Attributes(), func() golden.EventHash { return golden.LogEventHash(res, sl.Scope(), lr) })
				ts := lr.Timestamp()
				if ts == 0 {
					ts = lr.ObservedTimestamp()
				}
				e.Time = r.time(ts)
				e.SeverityNumber = int32(lr.SeverityNumber())
				e.SeverityText = r.text(lr.SeverityText())
				e.Message = r.text(lr.Body().AsString())
				if id := lr.TraceID(); !id.IsEmpty() {
					e.TraceID = id.String()
				}
				if id := lr.SpanID(); !id.IsEmpty() {
					e.SpanID = id.String()
				}
				r.fields(lr.Attributes(), res.Attributes(), lr.TraceID())
				e.Failed = eventFailed(&failure.Record{Attrs: lr.Attributes(), Service: e.Service, Stage: e.Stage,
					ResourceLogs: rl, ScopeLogs: sl, LogRecord: lr})
				events = append(events, r.done(&st))
			}
		}
	}
	return events, st
}

func (c converter) traces(td ptrace.Traces) ([]eventgraph.Event, convStats) {
	events := make([]eventgraph.Event, 0, td.SpanCount())
	var st convStats
	for _, rs := range td.ResourceSpans().All() {
		res := rs.Resource()
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				r := record{conv: c}
				e := &r.event
				e.Kind = eventgraph.KindSpan
				e.ID = r.eventID(span.Attributes(), func() golden.EventHash { return golden.SpanEventHash(res, ss.Scope(), span) })
				e.Time = r.time(span.StartTimestamp())
				e.End = r.time(span.EndTimestamp())
				e.Name = r.text(span.Name())
				status := span.Status()
				e.Status = strings.ToLower(status.Code().String())
				e.Message = r.text(status.Message())
				e.TraceID = span.TraceID().String()
				e.SpanID = span.SpanID().String()
				if id := span.ParentSpanID(); !id.IsEmpty() {
					e.ParentSpanID = id.String()
				}
				r.fields(span.Attributes(), res.Attributes(), span.TraceID())
				e.Failed = eventFailed(&failure.Record{Attrs: span.Attributes(), Service: e.Service, Stage: e.Stage, IsSpan: true,
					ResourceSpans: rs, ScopeSpans: ss, Span: span})
				events = append(events, r.done(&st))
			}
		}
	}
	return events, st
}

// record is one event under conversion and what its conversion counted.
type record struct {
	conv  converter
	event eventgraph.Event
	stats convStats
}

// time is ts as a time the stores can hold: nanoseconds since 1970 in an
// int64. A later one (past 2262) would wrap to before 1970; it is clamped
// to the last such time, and counted.
func (r *record) time(ts pcommon.Timestamp) time.Time {
	if ts > math.MaxInt64 {
		r.stats.sanitized++
		ts = math.MaxInt64
	}
	return ts.AsTime()
}

// done returns the event, adding its counts to st.
func (r *record) done(st *convStats) eventgraph.Event {
	e := &r.event
	if r.stats.truncated > 0 {
		r.attr(eventgraph.TruncatedAttr, float64(r.stats.truncated))
	}
	r.stats.edges = len(e.Causes)
	if e.AsyncOf != "" {
		r.stats.edges++
	}
	if e.ParentKey() != "" {
		r.stats.edges++
	}
	st.add(r.stats)
	return *e
}

// eventID is the record's event.id when it carries a valid one, else the computed identity.
func (r *record) eventID(attrs pcommon.Map, compute func() golden.EventHash) string {
	if v, ok := attrs.Get(golden.EventID); ok && v.Type() == pcommon.ValueTypeStr {
		if _, valid := golden.ParseEventHash(v.Str()); valid {
			return v.Str()
		}
	}
	r.stats.idsComputed++
	return compute().String()
}

// fields reads the golden fields (record first, then resource), the origin, the
// references to other events and the kept attributes. It reports whether the
// record names an error.type.
// explicit is the failure model's detector of the failures a record reports
// itself, with its default error attributes.
var explicit = failure.NewExplicit(failure.ExplicitConfig{})

// failed says whether the event shows its request's failure: it reports a
// failure itself, or the failure model's verdict on its request (written by
// reqsampling) names its place (service and stage) as the evidence of a
// silent failure or a slow stage. A request fails when any of its events
// does, so its outcome in the graph is the verdict sampling kept it by.
func eventFailed(rec *failure.Record) bool {
	if _, ok := explicit.Check(rec); ok {
		return true
	}
	return failure.NamesPlace(rec.Attrs, rec.Service, rec.Stage)
}

func (r *record) fields(attrs, resource pcommon.Map, trace pcommon.TraceID) {
	e := &r.event
	raw := func(name string) string {
		v, ok := attrs.Get(name)
		if !ok {
			v, ok = resource.Get(name)
		}
		if !ok {
			return ""
		}
		return v.AsString()
	}
	lookup := func(name string) string { return r.text(raw(name)) }
	// An id is never cut: one too long to be a request's makes no request.
	// A record without one belongs to the request its trace keys, as
	// reqidstitch would have written it.
	id := raw(golden.ReqID)
	if id != "" && !golden.UsableReqID(id) {
		r.stats.invalidRefs++
	}
	key, byTrace := golden.RequestKey(id, trace)
	e.ReqID = r.text(key)
	if byTrace || golden.KeyedByTrace(attrs) {
		r.attr(eventgraph.KeyAttr, golden.ReqIDFromTrace)
	}
	e.Stage = lookup(golden.Stage)
	e.ModelVer = lookup(golden.ModelVer)
	e.InputHash = lookup(golden.InputHash)
	e.GPU = lookup(golden.GPUID)
	e.Service = r.resourceText(resource, string(semconv.ServiceNameKey))
	e.Host = r.resourceText(resource, string(semconv.HostNameKey))
	if v, ok := attrs.Get(golden.StitchAsyncOf); ok {
		e.AsyncOf = r.reference(v.AsString())
	}
	r.causes(attrs)
	var names []string
	for k, v := range attrs.All() {
		switch {
		case k == string(semconv.ErrorTypeKey):
			r.attr(k, r.text(v.AsString()))
		case golden.IsResourceUsage(k), golden.IsOutcomeAttr(k):
			r.attr(k, r.value(v))
		case modeled[k], golden.IsLoomAttr(k):
		default:
			if len(names) < eventgraph.MaxFields {
				names = append(names, r.text(extract.TruncateUTF8(k, 128)))
			}
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		r.attr(eventgraph.FieldsAttr, names)
	}
	if dims := r.conv.dims.dims(attrs, resource); len(dims) > 0 {
		slices.Sort(dims)
		e.Dims = dims
	}
	if v, ok := attrs.Get(golden.SamplingAdjustedCount); ok && v.Type() == pcommon.ValueTypeDouble {
		e.AdjustedCount = r.adjustedCount(v.Double())
	}
	if reasons := failure.ReasonTexts(attrs); reasons != nil {
		for i, reason := range reasons {
			reasons[i] = r.text(reason)
		}
		r.attr(failure.ReasonsAttr, reasons)
		if symptoms := failure.ReasonAttributes(attrs); len(symptoms) > 0 {
			r.attr(eventgraph.SymptomsAttr, symptoms)
		}
	}
}

// adjustedCount is a sampling weight the stores can hold: a NaN or an
// infinity (which JSON and some stores lack) is counted and left out, as if
// the record had none.
func (r *record) adjustedCount(count float64) float64 {
	if math.IsNaN(count) || math.IsInf(count, 0) {
		r.stats.sanitized++
		return 0
	}
	return count
}

// modeled are the attributes the event holds in fields of its own.
var modeled = map[string]bool{golden.ReqID: true, golden.Stage: true, golden.ModelVer: true, golden.InputHash: true,
	golden.GPUID: true, golden.TraceID: true, golden.SpanID: true}

func (r *record) resourceText(resource pcommon.Map, name string) string {
	if v, ok := resource.Get(name); ok {
		return r.text(v.AsString())
	}
	return ""
}

// causes reads causal.parents ("{event.id}:{type}") with the rule of each entry from causal.rules.
func (r *record) causes(attrs pcommon.Map) {
	parents, ok := attrs.Get(golden.CausalParents)
	if !ok {
		return
	}
	rules := pcommon.NewSlice()
	if v, ok := attrs.Get(golden.CausalRules); ok && v.Type() == pcommon.ValueTypeSlice {
		rules = v.Slice()
	}
	entries := []pcommon.Value{parents}
	if parents.Type() == pcommon.ValueTypeSlice {
		entries = entries[:0]
		for _, v := range parents.Slice().All() {
			entries = append(entries, v)
		}
	}
	for i, entry := range entries {
		ref, edgeType, found := strings.Cut(entry.AsString(), ":")
		if !found || edgeType == "" {
			r.stats.invalidRefs++
			continue
		}
		id := r.reference(ref)
		if id == "" {
			continue
		}
		var rule string
		if i < rules.Len() {
			rule = rules.At(i).AsString()
		}
		r.event.Causes = append(r.event.Causes, eventgraph.Cause{EventID: id, Type: r.text(edgeType), Rule: r.text(rule)})
	}
}

// reference returns id when it is a valid event.id; otherwise it counts it and returns "".
func (r *record) reference(id string) string {
	if _, ok := golden.ParseEventHash(id); !ok {
		r.stats.invalidRefs++
		return ""
	}
	return id
}

func (r *record) attr(k string, v any) {
	if r.event.Attrs == nil {
		r.event.Attrs = make(map[string]any, 4)
	}
	r.event.Attrs[k] = v
}

// value converts an attribute to the model's types: numbers are float64, lists
// of text []string, everything else text.
func (r *record) value(v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeInt:
		return float64(v.Int())
	case pcommon.ValueTypeDouble:
		if f := v.Double(); !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
		// JSON and some stores have no NaN or infinity: keep the fact as text.
		r.stats.sanitized++
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	case pcommon.ValueTypeSlice:
		list := make([]string, v.Slice().Len())
		for i, x := range v.Slice().All() {
			list[i] = r.text(x.AsString())
		}
		return list
	}
	return r.text(v.AsString())
}

// text makes s safe to store: valid UTF-8, at most max_property_bytes.
func (r *record) text(s string) string {
	if !utf8.ValidString(s) {
		r.stats.sanitized++
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= r.conv.maxBytes {
		return s
	}
	r.stats.truncated++
	cut := r.conv.maxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
