package rcaextension

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jstore"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jtest"
	"github.com/loom-otel/loom/internal/eventgraph/sqlitestore"
)

// benchEvents is the size of the embedded store the benchmarks read: the
// issue's one million events, ten per request over an hour. The Neo4j store
// holds fewer: the shared test machine would take most of an hour to write a
// million into it.
const benchEvents, neo4jBenchEvents, benchPerRequest = 1_000_000, 50_000, 10

func benchRequestID(n int) string { return fmt.Sprintf("req-1746792%06d-%06d", n%1_000_000, n) }

// fillBenchStore writes the benchmark's events into s, spread over an hour:
// every 33rd request fails at its fifth event.
func fillBenchStore(b *testing.B, s eventgraph.Writer, events int) {
	ctx := context.Background()
	services := []string{"edge", "tokenizer", "engine", "filter", "store"}
	batch := make([]eventgraph.Event, 0, 10_000)
	requests := events / benchPerRequest
	for n := range requests {
		at := benchT0.Add(time.Duration(n) * time.Hour / time.Duration(requests))
		id := benchRequestID(n)
		for k := range benchPerRequest {
			e := eventgraph.Event{ID: fmt.Sprintf("%032x", n*benchPerRequest+k), ReqID: id, Service: services[k%5],
				Stage: services[k%5] + "/step", Time: at.Add(time.Duration(k) * time.Millisecond), TraceID: fmt.Sprintf("t%d", n),
				ModelVer: "model-v1", InputHash: fmt.Sprintf("%08x", n%5000),
				Dims:  []string{fmt.Sprintf("region=r%d", n%4), fmt.Sprintf("adapter=a%d", n%7)},
				Attrs: map[string]any{"resource_usage.latency_ms": float64(k), eventgraph.FieldsAttr: []string{"a.b", "c.d"}}}
			if k%2 == 0 {
				e.Kind, e.SpanID, e.End = eventgraph.KindSpan, fmt.Sprintf("s%d", k), e.Time.Add(5*time.Millisecond)
			} else {
				e.Kind, e.Message = eventgraph.KindLog, "step done"
			}
			e.Failed = n%33 == 0 && k == 5
			batch = append(batch, e)
		}
		if len(batch) == cap(batch) || n == requests-1 {
			if err := s.Write(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

var benchT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// BenchmarkEndpoints reports each endpoint's server time over an embedded
// store of a million events: mean and p95 per request.
func BenchmarkEndpoints(b *testing.B) {
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "graph.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close(ctx) })
	fillBenchStore(b, store, benchEvents)
	benchEndpoints(b, store, benchEvents)
}

// BenchmarkNeo4jEndpoints reports the same over the test Neo4j.
func BenchmarkNeo4jEndpoints(b *testing.B) {
	ctx := context.Background()
	srv := neo4jtest.Shared(b)
	srv.Clear(b)
	store, err := neo4jstore.Open(neo4jstore.Config{URI: srv.URI, Username: neo4jtest.Username, Password: srv.Password, MaxRows: 1000})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close(ctx) })
	fillBenchStore(b, store, neo4jBenchEvents)
	benchEndpoints(b, store, neo4jBenchEvents)
}

func benchEndpoints(b *testing.B, store eventgraph.Store, events int) {
	cfg := createDefaultConfig().(*Config)
	h := newHandler(cfg, func() (eventgraph.Store, bool) { return store, true }, lookupFailureMap(cfg),
		func() time.Time { return benchT0.Add(time.Hour) })
	b.Cleanup(h.close)
	failing := benchRequestID(33 * (events / benchPerRequest / 100))
	window := "from=" + benchT0.Add(45*time.Minute).Format(time.RFC3339) + "&to=" + benchT0.Add(time.Hour).Format(time.RFC3339)
	for _, path := range []string{
		"/api/requests/" + failing, "/requests/" + failing, "/api/requests/" + failing + "/compare",
		"/requests/" + failing + "/compare", "/api/failing?" + window,
		// Before the overview, whose background ranking would share the CPU with it.
		"/api/rootcause?" + window, "/?" + window,
	} {
		b.Run(path[:min(len(path), 40)], func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, req)
				took = append(took, time.Since(start))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", path, w.Code, w.Body.String())
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*95/100])/1e6, "p95_ms")
		})
	}
}
