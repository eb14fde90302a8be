// Package storetest is the conformance suite of event graph stores: every
// backend is written the same events and must give the same answers, checked
// against a reference model of the fixture's edges.
package storetest // import "github.com/loom-otel/loom/internal/eventgraph/storetest"

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
)

// T0 is the time of the fixture's first event.
var T0 = time.Date(2025, 5, 9, 12, 0, 0, 0, time.UTC)

// Request ids of the fixture.
const (
	ReqFailing = "req-1715234890123-a1b2c3"
	ReqHealthy = "req-1715234890999-zzzzzz"
)

// ID returns the fixture's event id number n.
func ID(n int) string { return fmt.Sprintf("%032x", n) }

// Fixture returns a failing request (a cache miss that triggered inference,
// an error, async work in a trace of its own), a healthy request and a noise
// record without req_id.
func Fixture() []eventgraph.Event {
	at := func(d time.Duration) time.Time { return T0.Add(d) }
	ms := time.Millisecond
	return []eventgraph.Event{
		{ID: ID(1), Kind: eventgraph.KindSpan, Time: at(0), End: at(900 * ms), ReqID: ReqFailing, Stage: "gateway/handle",
			Service: "gateway", Host: "node-a", Name: "POST /v1/chat", Status: "unset", TraceID: "t1", SpanID: "s1"},
		{ID: ID(2), Kind: eventgraph.KindSpan, Time: at(ms), End: at(6 * ms), ReqID: ReqFailing, Stage: "preproc/normalize",
			InputHash: "f7a1b2c3", Service: "preproc", Host: "node-a", Name: "preproc/normalize", Status: "ok",
			TraceID: "t1", SpanID: "s2", ParentSpanID: "s1", Attrs: map[string]any{golden.LatencyMs: 5.0}},
		{ID: ID(3), Kind: eventgraph.KindLog, Time: at(5 * ms), ReqID: ReqFailing, Stage: "preproc/normalize", Service: "preproc",
			Host: "node-a", SeverityNumber: 9, SeverityText: "INFO", Message: "normalized input tokens=42", TraceID: "t1", SpanID: "s2"},
		{ID: ID(4), Kind: eventgraph.KindLog, Time: at(10 * ms), ReqID: ReqFailing, Stage: "cache/miss", Service: "cache",
			Host: "node-a", SeverityNumber: 9, SeverityText: "INFO", Message: "cache miss key=resp:f7a1b2c3"},
		{ID: ID(5), Kind: eventgraph.KindSpan, Time: at(20 * ms), End: at(820 * ms), ReqID: ReqFailing, Stage: "model/forward",
			ModelVer: "llama3-8b-v2.3.2", InputHash: "f7a1b2c3", Service: "model", Host: "node-b", GPU: "GPU-0", Failed: true,
			Name: "model/forward", Status: "unset", TraceID: "t1", SpanID: "s3", ParentSpanID: "s1",
			Causes: []eventgraph.Cause{{EventID: ID(4), Type: "triggered", Rule: "cache_miss_trigger_inference"}},
			Dims:   []string{"lora.adapter=sql-v1", "region=eu-west"},
			Attrs:  map[string]any{golden.GPUMemMb: 10200.0, golden.ValidAttr: true}},
		{ID: ID(6), Kind: eventgraph.KindLog, Time: at(830 * ms), ReqID: ReqFailing, Stage: "postproc/filter", Service: "postproc",
			Host: "node-a", SeverityNumber: 17, SeverityText: "ERROR", Failed: true, Message: "upstream timeout",
			Attrs: map[string]any{"error.type": "timeout", golden.MissingAttr: []string{golden.ModelVer, golden.InputHash},
				eventgraph.SymptomsAttr: []string{"error.type"}, failure.ReasonsAttr: []string{"error_attribute: error.type=timeout"}}},
		{ID: ID(7), Kind: eventgraph.KindSpan, Time: at(1000 * ms), End: at(1100 * ms), ReqID: ReqFailing, Stage: "vectorstore/write",
			Service: "vector-writer", Host: "node-c", Name: "vectorstore/write", Status: "unset", TraceID: "t2", SpanID: "s4",
			AsyncOf: ID(1)},
		{ID: ID(8), Kind: eventgraph.KindLog, Time: at(1050 * ms), ReqID: ReqFailing, Stage: "vectorstore/write",
			Service: "vector-writer", Host: "node-c", SeverityNumber: 9, SeverityText: "INFO", Message: "start processing",
			TraceID: "t2", SpanID: "s4"},

		{ID: ID(11), Kind: eventgraph.KindSpan, Time: at(2000 * ms), End: at(2500 * ms), ReqID: ReqHealthy, Stage: "model/forward",
			ModelVer: "llama3-8b-v2.3.1", Service: "gateway", Host: "node-b", GPU: "GPU-1", Name: "model/forward", Status: "ok",
			TraceID: "t3", SpanID: "s5", AdjustedCount: 100, Dims: []string{"lora.adapter=none", "region=eu-west"}},
		{ID: ID(12), Kind: eventgraph.KindLog, Time: at(2100 * ms), ReqID: ReqHealthy, Stage: "model/forward", Service: "gateway",
			Host: "node-b", SeverityNumber: 9, SeverityText: "INFO", Message: "forward done", TraceID: "t3", SpanID: "s5"},

		{ID: ID(21), Kind: eventgraph.KindLog, Time: at(3000 * ms), Service: "gateway", Host: "node-a", SeverityNumber: 9,
			SeverityText: "INFO", Message: "received request"},
	}
}

// FixtureEdges are the fixture's event-to-event edges, as the model defines them.
func FixtureEdges() []eventgraph.Edge {
	next := func(a, b int) eventgraph.Edge {
		return eventgraph.Edge{From: ID(a), To: ID(b), Type: eventgraph.EdgeNext}
	}
	child := func(a, b int) eventgraph.Edge {
		return eventgraph.Edge{From: ID(a), To: ID(b), Type: eventgraph.EdgeChildOf}
	}
	return []eventgraph.Edge{
		next(1, 2), next(2, 3), next(3, 4), next(4, 5), next(5, 6), next(6, 7), next(7, 8), next(11, 12),
		child(2, 1), child(3, 2), child(5, 1), child(8, 7), child(12, 11),
		{From: ID(4), To: ID(5), Type: eventgraph.EdgeCaused, CauseType: "triggered", Rule: "cache_miss_trigger_inference"},
		{From: ID(7), To: ID(1), Type: eventgraph.EdgeAsyncOf},
	}
}

// Opener returns an empty store for one test, which tells onReject (when
// not nil) of the events it refuses to write.
type Opener func(t *testing.T, onReject eventgraph.RejectFunc) eventgraph.Backend

// Run runs the conformance suite. Subtests run one after the other: a
// backend may share one database between them, emptied by open.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, eventgraph.Backend)
	}{
		{"Timeline", testTimeline},
		{"Neighbourhood", testNeighbourhood},
		{"IdempotentAnyOrder", testIdempotentAnyOrder},
		{"DanglingReferences", testDanglingReferences},
		{"MergeKeepsValues", testMergeKeepsValues},
		{"Requests", testRequests},
		{"DimensionEvents", testDimensionEvents},
		{"SchemaDrifts", testSchemaDrifts},
		{"HostileStrings", testHostileStrings},
		{"NotFound", testNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t, nil)) })
	}
	t.Run("NoTakeOver", func(t *testing.T) { testNoTakeOver(t, open) })
}

// testNoTakeOver writes records that carry the id of another request's
// event, with and without a req_id of their own and with a cause: the
// store refuses them, tells of each, and the graph is the fixture's.
func testNoTakeOver(t *testing.T, open Opener) {
	ctx := context.Background()
	var refused []string
	s := open(t, func(e eventgraph.Event) { refused = append(refused, e.ReqID+"/"+e.Message) })
	write(t, s, Fixture()...)
	victim := Fixture()[4]
	forged := eventgraph.Event{ID: victim.ID, Kind: eventgraph.KindLog, Time: victim.Time.Add(time.Hour), ReqID: ReqHealthy,
		Service: "intruder", Message: "forged", Causes: []eventgraph.Cause{{EventID: ID(12), Type: "caused", Rule: "forged"}}}
	anonymous := forged
	anonymous.ReqID, anonymous.Message = "", "anonymous"
	// In one batch, the first request to name a new id holds it.
	first := eventgraph.Event{ID: ID(40), Kind: eventgraph.KindLog, Time: T0.Add(time.Hour), ReqID: "req-first", Message: "first"}
	second := first
	second.ReqID, second.Message = "req-second", "second"
	write(t, s, forged, anonymous, first, second)
	assert.Equal(t, []string{ReqHealthy + "/forged", "/anonymous", "req-second/second"}, refused)

	assertTimelines(t, s, "req-second")
	requests, err := s.Requests(ctx, T0, T0.Add(2*time.Hour), false)
	require.NoError(t, err)
	assert.Len(t, requests, 2, "the healthy request and req-first; the refused records make no request")
	g, err := s.Neighbourhood(ctx, victim.ID, 1)
	require.NoError(t, err)
	for _, e := range g.Edges {
		assert.NotEqual(t, "forged", e.Rule, "a refused record's causes are not written")
	}
}

func write(t *testing.T, s eventgraph.Writer, events ...eventgraph.Event) {
	t.Helper()
	require.NoError(t, s.Write(context.Background(), events))
}

func eventsOf(events []eventgraph.Event, reqID string) []eventgraph.Event {
	var out []eventgraph.Event
	for _, e := range events {
		if e.ReqID == reqID {
			out = append(out, e)
		}
	}
	eventgraph.SortEvents(out)
	return out
}

func testTimeline(t *testing.T, s eventgraph.Backend) {
	write(t, s, Fixture()...)
	assertTimelines(t, s, "req-unknown")
}

// assertTimelines checks that the store holds the fixture's requests as
// written, and nothing of the request absent.
func assertTimelines(t *testing.T, s eventgraph.Store, absent string) {
	t.Helper()
	ctx := context.Background()
	for _, req := range []string{ReqFailing, ReqHealthy} {
		got, err := s.Timeline(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, eventsOf(Fixture(), req), got, req)
	}
	got, err := s.Timeline(ctx, absent)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// reference is the neighbourhood the model defines: BFS over the fixture's edges.
func reference(events []eventgraph.Event, edges []eventgraph.Edge, start string, depth int) eventgraph.Graph {
	seen := map[string]bool{start: true}
	frontier := []string{start}
	for range depth {
		var next []string
		for _, id := range frontier {
			for _, e := range edges {
				for _, pair := range [][2]string{{e.From, e.To}, {e.To, e.From}} {
					if pair[0] == id && !seen[pair[1]] {
						seen[pair[1]] = true
						next = append(next, pair[1])
					}
				}
			}
		}
		frontier = next
	}
	var g eventgraph.Graph
	for _, e := range events {
		if seen[e.ID] {
			g.Events = append(g.Events, e)
		}
	}
	eventgraph.SortEvents(g.Events)
	for _, e := range edges {
		if seen[e.From] && seen[e.To] {
			g.Edges = append(g.Edges, e)
		}
	}
	sortEdges(g.Edges)
	return g
}

func sortEdges(edges []eventgraph.Edge) {
	slices.SortFunc(edges, func(x, y eventgraph.Edge) int {
		return cmp.Or(cmp.Compare(x.From, y.From), cmp.Compare(x.To, y.To), cmp.Compare(x.Type, y.Type),
			cmp.Compare(x.CauseType, y.CauseType), cmp.Compare(x.Rule, y.Rule))
	})
}

// checkGraph compares every neighbourhood of the fixture with the reference model.
func checkGraph(t *testing.T, s eventgraph.Store, events []eventgraph.Event) {
	t.Helper()
	ctx := context.Background()
	for _, e := range events {
		for _, depth := range []int{0, 1, 2, eventgraph.MaxDepth} {
			got, err := s.Neighbourhood(ctx, e.ID, depth)
			require.NoError(t, err)
			assert.Equal(t, reference(events, FixtureEdges(), e.ID, depth), got, "neighbourhood of %s to depth %d", e.ID, depth)
		}
	}
}

func testNeighbourhood(t *testing.T, s eventgraph.Backend) {
	write(t, s, Fixture()...)
	checkGraph(t, s, Fixture())
}

// testIdempotentAnyOrder writes the fixture one event at a time in a random
// order, then again as one batch: the graph must be the one of a single write.
func testIdempotentAnyOrder(t *testing.T, s eventgraph.Backend) {
	events := Fixture()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3 {
		rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
		for _, e := range events {
			write(t, s, e)
		}
	}
	write(t, s, events...)
	checkGraph(t, s, Fixture())
	got, err := s.Timeline(context.Background(), ReqFailing)
	require.NoError(t, err)
	assert.Equal(t, eventsOf(Fixture(), ReqFailing), got)
}

// testDanglingReferences writes effects before their causes and detached work
// before its root: the edges appear when the other end arrives.
func testDanglingReferences(t *testing.T, s eventgraph.Backend) {
	ctx := context.Background()
	events := Fixture()
	write(t, s, events[4], events[6]) // model/forward (caused by #4), async span (of #1)
	got, err := s.Neighbourhood(ctx, ID(5), 1)
	require.NoError(t, err)
	assert.Equal(t, []string{ID(5), ID(7)}, ids(got.Events), "a reference to an unwritten event is no neighbour")
	assert.Equal(t, []eventgraph.Edge{{From: ID(5), To: ID(7), Type: eventgraph.EdgeNext}}, got.Edges)
	timeline, err := s.Timeline(ctx, ReqFailing)
	require.NoError(t, err)
	require.Len(t, timeline, 2)
	assert.Equal(t, events[4].Causes, timeline[0].Causes, "the record's causes are kept")
	assert.Equal(t, ID(1), timeline[1].AsyncOf)

	write(t, s, events...)
	checkGraph(t, s, Fixture())
}

func ids(events []eventgraph.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// testMergeKeepsValues writes an event again with some values absent and some
// new: absent values are kept, new ones added, attributes merged by key.
func testMergeKeepsValues(t *testing.T, s eventgraph.Backend) {
	full := Fixture()[4]
	write(t, s, full)
	partial := eventgraph.Event{ID: full.ID, Kind: full.Kind, Time: full.Time, ReqID: full.ReqID, Failed: full.Failed,
		AdjustedCount: 4, Attrs: map[string]any{golden.Tokens: 42.0}}
	write(t, s, partial)
	got, err := s.Timeline(context.Background(), full.ReqID)
	require.NoError(t, err)
	require.Len(t, got, 1)
	want := full
	want.Attrs = maps.Clone(full.Attrs)
	want.Attrs[golden.Tokens] = 42.0
	want.AdjustedCount = 4
	assert.Equal(t, want, got[0])
}

func testRequests(t *testing.T, s eventgraph.Backend) {
	ctx := context.Background()
	write(t, s, Fixture()...)
	got, err := s.Requests(ctx, T0, T0.Add(time.Hour), false)
	require.NoError(t, err)
	assert.Equal(t, []eventgraph.Request{{ReqID: ReqHealthy, First: T0.Add(2 * time.Second), Last: T0.Add(2500 * time.Millisecond)}}, got)

	got, err = s.Requests(ctx, T0, T0.Add(time.Hour), true)
	require.NoError(t, err)
	assert.Equal(t, []eventgraph.Request{{ReqID: ReqFailing, Failed: true, First: T0, Last: T0.Add(1100 * time.Millisecond)}}, got)

	got, err = s.Requests(ctx, T0.Add(1100*time.Millisecond), T0.Add(time.Hour), true)
	require.NoError(t, err)
	assert.Len(t, got, 1, "a request is active up to its last event")
	got, err = s.Requests(ctx, T0.Add(2*time.Second), T0.Add(time.Hour), true)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = s.Requests(ctx, T0.Add(-time.Hour), T0, true)
	require.NoError(t, err)
	assert.Empty(t, got, "the window's end is exclusive")
}

// referenceDimensionEvents is what DimensionEvents returns for the fixture's
// events in [from, to), in a canonical order.
func referenceDimensionEvents(events []eventgraph.Event, from, to time.Time) []eventgraph.DimensionEvent {
	failed := map[string]bool{}
	for _, r := range eventgraph.Requests(events) {
		failed[r.ReqID] = r.Failed
	}
	var out []eventgraph.DimensionEvent
	for _, e := range events {
		if e.ReqID == "" || e.Time.Before(from) || !e.Time.Before(to) {
			continue
		}
		d := eventgraph.DimensionEvent{ReqID: e.ReqID, Time: e.Time, End: e.End, RequestFailed: failed[e.ReqID], EventFailed: e.Failed,
			ReportsError: e.ReportsError(), AdjustedCount: max(e.AdjustedCount, 1),
			ModelVer: e.ModelVer, InputHash: e.InputHash, Service: e.Service, Host: e.Host, GPU: e.GPU, Dims: e.Dims}
		if e.Failed && d.RequestFailed {
			f := &eventgraph.EventFailure{}
			f.Symptoms, _ = e.Attrs[eventgraph.SymptomsAttr].([]string)
			f.Reasons, _ = e.Attrs[failure.ReasonsAttr].([]string)
			for _, c := range e.Causes {
				if !slices.Contains(f.CausedBy, c.Rule) {
					f.CausedBy = append(f.CausedBy, c.Rule)
				}
			}
			slices.Sort(f.CausedBy)
			d.Failure = f
		}
		out = append(out, d)
	}
	return sortedDimensionEvents(out)
}

func sortedDimensionEvents(events []eventgraph.DimensionEvent) []eventgraph.DimensionEvent {
	if len(events) == 0 {
		return nil
	}
	slices.SortFunc(events, func(x, y eventgraph.DimensionEvent) int {
		return cmp.Or(cmp.Compare(x.ReqID, y.ReqID), x.Time.Compare(y.Time), cmp.Compare(x.Service, y.Service),
			cmp.Compare(strings.Join(x.Dims, ","), strings.Join(y.Dims, ",")), cmp.Compare(x.GPU, y.GPU),
			cmp.Compare(x.Host, y.Host), cmp.Compare(x.ModelVer, y.ModelVer), cmp.Compare(x.InputHash, y.InputHash))
	})
	return events
}

func testDimensionEvents(t *testing.T, s eventgraph.Backend) {
	ctx := context.Background()
	write(t, s, Fixture()...)
	for _, window := range [][2]time.Duration{{0, time.Hour}, {2 * time.Second, time.Hour}, {-time.Hour, 0}, {5 * time.Millisecond, 830 * time.Millisecond}} {
		from, to := T0.Add(window[0]), T0.Add(window[1])
		got, truncated, err := s.DimensionEvents(ctx, from, to, 1000)
		require.NoError(t, err)
		assert.False(t, truncated)
		assert.Equal(t, referenceDimensionEvents(Fixture(), from, to), sortedDimensionEvents(got), "window %v", window)
	}
	got, truncated, err := s.DimensionEvents(ctx, T0, T0.Add(time.Hour), 3)
	require.NoError(t, err)
	assert.True(t, truncated, "a window with more events than the limit says so")
	assert.Len(t, got, 3)
}

func testSchemaDrifts(t *testing.T, s eventgraph.Backend) {
	ctx := context.Background()
	drift := eventgraph.Event{ID: ID(300), Kind: eventgraph.KindLog, Time: T0.Add(time.Second), Service: "model", Stage: "model/forward",
		ModelVer: "llama3-8b-v2.3.2", SeverityNumber: 13, SeverityText: "WARN",
		Message: "schema drift in model model/forward: model_ver llama3-8b-v2.3.1 -> llama3-8b-v2.3.2 lost raw_output_hash (100% -> 0%)",
		Attrs:   map[string]any{golden.DriftOldModelVer: "llama3-8b-v2.3.1", golden.DriftFieldsLost: []string{"raw_output_hash"}}}
	noise := eventgraph.Event{ID: ID(301), Kind: eventgraph.KindLog, Time: T0.Add(2 * time.Second), Service: "model", SeverityNumber: 9,
		Message: "received request"}
	marked := eventgraph.Event{ID: ID(302), Kind: eventgraph.KindLog, Time: T0.Add(3 * time.Second), ReqID: ReqFailing, Service: "model",
		SeverityNumber: 9, Attrs: map[string]any{golden.DriftOldModelVer: "llama3-8b-v2.3.1", golden.DriftFieldsLost: []string{"raw_output_hash"}}}
	write(t, s, drift, noise, marked)
	got, err := s.SchemaDrifts(ctx, T0, T0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, []eventgraph.Event{drift}, got, "a finding of no request; not a request's record that carries the mark")
	got, err = s.SchemaDrifts(ctx, T0, T0.Add(time.Second))
	require.NoError(t, err)
	assert.Empty(t, got, "the window's end is exclusive")
}

// Hostile are values that would break queries built by concatenation.
var Hostile = []string{
	`req-"quoted"-'single'`,
	`req-{braces}-[brackets]-(parens)`,
	"req-`backtick` MATCH (n) DETACH DELETE n //",
	`'}) MERGE (x:Pwned) WITH x MATCH (n) DETACH DELETE n //`,
	`"; DROP TABLE events; --`,
	`$rows \u0000 \\ \n newline`,
	"unicode ☃ 😀 \u202e nul \x00 byte",
	// As long as the exporter lets a value be (4 KiB), below Neo4j's 8 KB index key limit.
	strings.Repeat("long-", 819),
}

func testHostileStrings(t *testing.T, s eventgraph.Backend) {
	ctx := context.Background()
	var events []eventgraph.Event
	for i, h := range Hostile {
		events = append(events, eventgraph.Event{
			ID: ID(100 + i), Kind: eventgraph.KindLog, Time: T0.Add(time.Duration(i) * time.Second), ReqID: h, Stage: h,
			ModelVer: h, InputHash: h, Service: h, Host: h, GPU: h, SeverityText: h, Message: h, SeverityNumber: 9,
			Causes: []eventgraph.Cause{{EventID: ID(200 + i), Type: h, Rule: h}}, Dims: []string{"dim=" + h},
			Attrs: map[string]any{golden.MissingAttr: []string{h}, "error.type": h},
		})
	}
	write(t, s, events...)
	for _, e := range events {
		got, err := s.Timeline(ctx, e.ReqID)
		require.NoError(t, err)
		assert.Equal(t, []eventgraph.Event{e}, got)
	}
	dims, _, err := s.DimensionEvents(ctx, T0, T0.Add(time.Hour), 1000)
	require.NoError(t, err)
	assert.Len(t, dims, len(Hostile))
	assert.Contains(t, dims, eventgraph.DimensionEvent{ReqID: Hostile[3], Time: T0.Add(3 * time.Second), AdjustedCount: 1, ModelVer: Hostile[3],
		InputHash: Hostile[3], Service: Hostile[3], Host: Hostile[3], GPU: Hostile[3], Dims: []string{"dim=" + Hostile[3]}})
	_, err = s.Neighbourhood(ctx, Hostile[3], 1)
	assert.ErrorIs(t, err, eventgraph.ErrNotFound)
}

func testNotFound(t *testing.T, s eventgraph.Backend) {
	ctx := context.Background()
	write(t, s, Fixture()...)
	_, err := s.Neighbourhood(ctx, ID(999), 2)
	assert.ErrorIs(t, err, eventgraph.ErrNotFound)
	_, err = s.Neighbourhood(ctx, ID(1), eventgraph.MaxDepth+1)
	assert.Error(t, err)
	_, err = s.Neighbourhood(ctx, ID(1), -1)
	assert.Error(t, err)
}
