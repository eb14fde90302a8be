package eventgraphexporter

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/exporter/eventgraphexporter/internal/metadatatest"
	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jstore"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jtest"
	"github.com/loom-otel/loom/internal/eventgraph/sqlitestore"
	"github.com/loom-otel/loom/internal/eventgraph/storetest"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
)

// workloadRequests keeps the real-database tests to seconds: about 2,000 records.
const workloadRequests = 150

var (
	workloadOnce sync.Once
	sharedData   *workloadData
)

func testWorkload(t *testing.T) *workloadData {
	t.Helper()
	workloadOnce.Do(func() { sharedData = generateWorkload(t, workloadRequests) })
	require.NotNil(t, sharedData, "generating the workload failed")
	return sharedData
}

func openEmbedded(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func openNeo4j(t testing.TB, srv *neo4jtest.Server) *neo4jstore.Store {
	t.Helper()
	s, err := neo4jstore.Open(neo4jstore.Config{URI: srv.URI, Username: neo4jtest.Username, Password: srv.Password, MaxRows: 1000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// embeddedCounts counts the embedded graph by label and edge type: nodes and
// CAUSED edges are rows, the other edges are derived, so they are counted
// through the store's own adjacency, the one its readers use.
func embeddedCounts(t *testing.T, s *sqlitestore.Store) graphCounts {
	t.Helper()
	c := graphCounts{}
	db := s.DB()
	for label, query := range map[string]string{
		"Event":     `SELECT count(*) FROM events`,
		"Request":   `SELECT count(*) FROM requests`,
		"Model":     `SELECT count(DISTINCT model_ver) FROM events`,
		"InputHash": `SELECT count(DISTINCT input_hash) FROM events`,
		"GPU":       `SELECT count(DISTINCT gpu) FROM events`,
		"Service":   `SELECT count(DISTINCT service) FROM events`,
		"Host":      `SELECT count(DISTINCT host) FROM events`,
	} {
		var n int64
		require.NoError(t, db.QueryRow(query).Scan(&n))
		if n > 0 {
			c[label] = n
		}
	}
	for edge, column := range map[string]string{"IN_REQUEST": "req_id", "USES_MODEL": "model_ver", "HAS_INPUT": "input_hash",
		"ON_GPU": "gpu", "FROM_SERVICE": "service", "ON_HOST": "host"} {
		var n int64
		require.NoError(t, db.QueryRow(`SELECT count(`+column+`) FROM events`).Scan(&n))
		if n > 0 {
			c[edge] = n
		}
	}
	var ids []string
	rows, err := db.Query(`SELECT event_id FROM events`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	_ = rows.Close()
	edges, err := s.Adjacent(context.Background(), ids)
	require.NoError(t, err)
	seen := map[eventgraph.Edge]bool{}
	for _, e := range edges {
		if !seen[e] {
			seen[e] = true
			c[string(e.Type)]++
		}
	}
	return c
}

// neo4jCounts counts the Neo4j graph by label and edge type with Cypher.
func neo4jCounts(t *testing.T, srv *neo4jtest.Server) graphCounts {
	t.Helper()
	c := graphCounts{}
	for _, label := range []string{"Event", "Request", "Model", "InputHash", "GPU", "Service", "Host"} {
		if n := srv.Count(t, `MATCH (n:`+label+`) RETURN count(n)`, nil); n > 0 {
			c[label] = n
		}
	}
	for _, edge := range []string{"NEXT", "CHILD_OF", "CAUSED", "ASYNC_OF", "IN_REQUEST", "USES_MODEL", "HAS_INPUT", "ON_GPU", "FROM_SERVICE", "ON_HOST"} {
		if n := srv.Count(t, `MATCH ()-[r:`+edge+`]->() RETURN count(r)`, nil); n > 0 {
			c[edge] = n
		}
	}
	c["all nodes"] = srv.Count(t, `MATCH (n) RETURN count(n)`, nil)
	c["all edges"] = srv.Count(t, `MATCH ()-[r]->() RETURN count(r)`, nil)
	return c
}

// readWindow spans the whole workload, which ran just now.
func readWindow() (time.Time, time.Time) {
	now := time.Now()
	return now.Add(-time.Hour), now.Add(time.Hour)
}

// checkReads checks a store's read interface against the workload.
func checkReads(t *testing.T, s eventgraph.Store, w *workloadData) {
	t.Helper()
	ctx := context.Background()
	for _, req := range w.requestIDs() {
		timeline, err := s.Timeline(ctx, req)
		require.NoError(t, err)
		require.Len(t, timeline, w.perRequest[req], req)
		assert.True(t, slices.IsSortedFunc(timeline, func(a, b eventgraph.Event) int { return a.Time.Compare(b.Time) }), req)
	}
	from, to := readWindow()
	failing, err := s.Requests(ctx, from, to, true)
	require.NoError(t, err)
	assert.Equal(t, w.failingIDs(), reqIDs(failing))
	for _, tr := range w.truth {
		if tr.Scenario == workload.S3 {
			assert.Contains(t, reqIDs(failing), tr.ReqID, "S3 tasks fail with errors")
		}
	}
	// S3's ground truth is the worker host: the host shared by the most failing requests.
	events, truncated, err := s.DimensionEvents(ctx, from, to, 1_000_000)
	require.NoError(t, err)
	require.False(t, truncated)
	failingByHost := map[string]map[string]bool{}
	for _, e := range events {
		if e.RequestFailed && e.Host != "" {
			if failingByHost[e.Host] == nil {
				failingByHost[e.Host] = map[string]bool{}
			}
			failingByHost[e.Host][e.ReqID] = true
		}
	}
	var top string
	for host, reqs := range failingByHost {
		if len(reqs) > len(failingByHost[top]) {
			top = host
		}
	}
	for _, tr := range w.truth {
		if tr.Scenario == workload.S3 {
			assert.Equal(t, tr.RootCause.Value, top, "the failing host")
			break
		}
	}
}

// withoutDims drops the discovered dimensions: which attribute shows too
// many values first, and so stops being listed, depends on the order the
// exporter's consumers take batches in.
func withoutDims(events []eventgraph.Event) []eventgraph.Event {
	for i := range events {
		events[i].Dims = nil
	}
	return events
}

// dimensionFields are a window's dimension events without the discovered
// dimensions (which attribute shows too many values first depends on the
// order batches arrive in), sorted.
func dimensionFields(t *testing.T, s eventgraph.Store) []eventgraph.DimensionEvent {
	from, to := readWindow()
	events, _, err := s.DimensionEvents(context.Background(), from, to, 1_000_000)
	require.NoError(t, err)
	for i := range events {
		events[i].Dims = nil
	}
	slices.SortFunc(events, func(a, b eventgraph.DimensionEvent) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return events
}

// TestWorkloadGraph writes the S1–S3 workload into both backends through the
// exporter and checks the graph against the model's reference counts; sending
// everything again changes nothing; both backends answer reads alike.
func TestWorkloadGraph(t *testing.T) {
	w := testWorkload(t)
	require.NotZero(t, w.want["CAUSED"])
	require.NotZero(t, w.want["ASYNC_OF"])
	t.Logf("workload: %d requests, want %v", len(w.perRequest), w.want)

	// Embedded.
	cfg := embeddedConfig(t)
	for range 2 {
		p := startPipeline(t, cfg, nil)
		w.send(t, p)
		p.shutdown(t)
		embedded := openEmbedded(t, cfg.Embedded.Path)
		assert.Equal(t, w.want, embeddedCounts(t, embedded))
		checkReads(t, embedded, w)
		require.NoError(t, embedded.Close(context.Background()))
	}

	// Neo4j.
	srv := neo4jtest.Shared(t)
	srv.Clear(t)
	p := startPipeline(t, neo4jConfig(srv), nil)
	began := time.Now()
	w.send(t, p)
	t.Logf("neo4j: %d events written in %v", w.want["Event"], time.Since(began))
	first := neo4jCounts(t, srv)
	for k, v := range w.want {
		assert.Equal(t, v, first[k], k)
	}
	assert.Equal(t, int64(0), srv.Count(t, `MATCH (e:Event) WHERE e.time IS NULL RETURN count(e)`, nil), "no placeholder is left")
	w.send(t, p)
	assert.Equal(t, first, neo4jCounts(t, srv), "sending everything again changes nothing")
	graph := openNeo4j(t, srv)
	checkReads(t, graph, w)

	// Both backends give the same answers.
	embedded := openEmbedded(t, cfg.Embedded.Path)
	ctx := context.Background()
	for i, req := range w.requestIDs() {
		fromEmbedded, err := embedded.Timeline(ctx, req)
		require.NoError(t, err)
		fromNeo4j, err := graph.Timeline(ctx, req)
		require.NoError(t, err)
		require.Equal(t, withoutDims(fromEmbedded), withoutDims(fromNeo4j), req)
		if i%10 == 0 {
			for _, depth := range []int{1, 3} {
				a, err := embedded.Neighbourhood(ctx, fromEmbedded[0].ID, depth)
				require.NoError(t, err)
				b, err := graph.Neighbourhood(ctx, fromEmbedded[0].ID, depth)
				require.NoError(t, err)
				withoutDims(a.Events)
				withoutDims(b.Events)
				require.Equal(t, a, b, "%s depth %d", req, depth)
			}
		}
	}
	assert.Equal(t, dimensionFields(t, embedded), dimensionFields(t, graph))

	checkREADMECypher(t, srv, w)
}

// checkREADMECypher runs the README's Cypher on the workload's graph: each
// query must run and answer, and the failing-dimension query must rank S3's
// ground truth (the worker host) in its top three.
func checkREADMECypher(t *testing.T, srv *neo4jtest.Server, w *workloadData) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	queries := regexp.MustCompile("(?s)```cypher\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	require.Len(t, queries, 3)
	var s3 workload.Truth
	for _, tr := range w.truth {
		if tr.Scenario == workload.S3 {
			s3 = tr
		}
	}
	from, to := readWindow()
	params := map[string]any{"req_id": s3.ReqID, "from": from.UTC(), "to": to.UTC()}
	for i, q := range queries {
		res, err := neo4j.ExecuteQuery(context.Background(), srv.Driver(t), q[1], params, neo4j.EagerResultTransformer)
		require.NoError(t, err, "README query %d", i+1)
		require.NotEmpty(t, res.Records, "README query %d", i+1)
		if i == 2 {
			var top []any
			for _, r := range res.Records[:min(3, len(res.Records))] {
				value, _ := r.Get("value")
				top = append(top, value)
			}
			assert.Contains(t, top, s3.RootCause.Value)
		}
	}
}

// hostileLogs are records whose golden fields and bodies would break a query
// built by concatenation, plus an oversized body and records without event.id.
func hostileLogs() plog.Logs {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	for i, h := range storetest.Hostile {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommonTimeAt(t0.Add(time.Duration(i) * time.Second)))
		lr.SetSeverityNumber(plog.SeverityNumberError)
		lr.Body().SetStr(h)
		lr.Attributes().PutStr(golden.ReqID, h)
		lr.Attributes().PutStr(golden.Stage, h)
		lr.Attributes().PutStr(golden.ModelVer, h)
	}
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommonTimeAt(t0.Add(time.Minute)))
	lr.Body().SetStr(strings.Repeat("x", 100<<10))
	lr.Attributes().PutStr(golden.ReqID, "req-oversized")
	return ld
}

func TestBadInputStoredLiterally(t *testing.T) {
	srv := neo4jtest.Shared(t)
	srv.Clear(t)
	embeddedCfg := embeddedConfig(t)
	for name, cfg := range map[string]*Config{"embedded": embeddedCfg, "neo4j": neo4jConfig(srv)} {
		t.Run(name, func(t *testing.T) {
			p := startPipeline(t, cfg, nil)
			require.NoError(t, p.logs.ConsumeLogs(context.Background(), hostileLogs()))
			opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
			records := int64(len(storetest.Hostile) + 1)
			metadatatest.AssertEqualExporterEventgraphEventsWritten(t, p.tt, []metricdata.DataPoint[int64]{{Value: records}}, opts...)
			metadatatest.AssertEqualExporterEventgraphEventIdsComputed(t, p.tt, []metricdata.DataPoint[int64]{{Value: records}}, opts...)
			metadatatest.AssertEqualExporterEventgraphPropertiesTruncated(t, p.tt, []metricdata.DataPoint[int64]{{Value: 1}}, opts...)
			metadatatest.AssertEqualExporterEventgraphReferencesInvalid(t, p.tt, []metricdata.DataPoint[int64]{{Value: 1}}, opts...)
			p.shutdown(t)

			var store eventgraph.Store
			if name == "neo4j" {
				store = openNeo4j(t, srv)
				assert.Equal(t, records, srv.Count(t, `MATCH (e:Event) RETURN count(e)`, nil), "nothing was deleted or injected")
				assert.Equal(t, int64(0), srv.Count(t, `MATCH (n:Pwned) RETURN count(n)`, nil))
			} else {
				store = openEmbedded(t, embeddedCfg.Embedded.Path)
			}
			ctx := context.Background()
			for _, h := range storetest.Hostile {
				timeline, err := store.Timeline(ctx, h)
				require.NoError(t, err)
				if !golden.UsableReqID(h) {
					assert.Empty(t, timeline, "a req_id too long to be an id makes no request")
					continue
				}
				require.Len(t, timeline, 1, h)
				e := timeline[0]
				assert.Equal(t, []string{h, h, h, h}, []string{e.ReqID, e.Stage, e.ModelVer, e.Message})
				assert.True(t, e.Failed)
			}
			timeline, err := store.Timeline(ctx, "req-oversized")
			require.NoError(t, err)
			require.Len(t, timeline, 1)
			assert.Equal(t, strings.Repeat("x", 4096), timeline[0].Message)
			assert.Equal(t, map[string]any{eventgraph.TruncatedAttr: 1.0}, timeline[0].Attrs)
		})
	}
}
