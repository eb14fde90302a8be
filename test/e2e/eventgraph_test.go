//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/loom-otel/loom/internal/eventgraph/neo4jtest"
	"github.com/loom-otel/loom/internal/eventgraph/sqlitestore"
	"github.com/loom-otel/loom/internal/workload"
)

// causeAndEffect is a cache miss and the forward pass it triggered, at fixed
// times, so that sending it twice sends the same records twice.
func causeAndEffect() plog.Logs {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "cache")
	records := rl.ScopeLogs().AppendEmpty().LogRecords()
	for i, stage := range []string{"cache/miss", "model/forward"} {
		lr := records.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(i) * 100 * time.Millisecond)))
		lr.Body().SetStr("stage=" + stage + " req_id=req-1764417600000-cafe01")
	}
	return ld
}

// TestEventGraphFromTheCollector writes the S1–S3 mix through the default
// pipeline into both graph backends, Neo4j (a real server) and the default
// config's embedded store, and checks the graph against the ground truth:
// every record is an event of its request, async work and causes are edges,
// and sending the same records again changes nothing.
func TestEventGraphFromTheCollector(t *testing.T) {
	neo := neo4jtest.Shared(t)
	neo.Clear(t)
	col := startCollector(t, "distribution/config.yaml", func(cfg map[string]any) {
		keepEveryRequest(cfg)
		mapAt(cfg, "exporters")["eventgraph/neo4j"] = map[string]any{
			"backend": "neo4j",
			"neo4j":   map[string]any{"uri": neo.URI, "username": neo4jtest.Username, "password": neo.Password},
		}
		for _, name := range []string{"logs", "traces"} {
			p := mapAt(cfg, "service", "pipelines", name)
			p["exporters"] = append(p["exporters"].([]any), "eventgraph/neo4j")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sent, truths := sendWorkload(t, col, workload.GRPC, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12,
		Requests:  400,
		Seed:      19,
	})

	const events = `MATCH (e:Event) WHERE e.time IS NOT NULL RETURN count(e)`
	waitForCount := func(query string, atLeast int64) int64 {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		n := neo.Count(t, query, nil)
		for ; n < atLeast && time.Now().Before(deadline); n = neo.Count(t, query, nil) {
			time.Sleep(500 * time.Millisecond)
		}
		time.Sleep(3 * time.Second) // anything more would be a duplicate
		return neo.Count(t, query, nil)
	}
	written := waitForCount(events, int64(sent.Logs+sent.Spans))
	// Beside the records sent: the collector's own schema.drift findings.
	if extra := written - int64(sent.Logs+sent.Spans); extra < 0 || extra > 2 {
		t.Fatalf("neo4j holds %d events for %d records sent\ncollector log:\n%s", written, sent.Logs+sent.Spans, col.log())
	}

	res, err := neo4j.ExecuteQuery(ctx, neo.Driver(t), `MATCH (e:Event)-[:IN_REQUEST]->(r:Request) RETURN r.req_id AS id, count(e) AS n`, nil, neo4j.EagerResultTransformer)
	if err != nil {
		t.Fatal(err)
	}
	perRequest := map[string]int64{}
	for _, rec := range res.Records {
		id, _ := rec.Get("id")
		n, _ := rec.Get("n")
		perRequest[id.(string)] = n.(int64)
	}
	for _, tr := range truths {
		if perRequest[tr.ReqID] != int64(tr.Spans+tr.Logs) {
			t.Errorf("neo4j: request %s has %d events, %d records were sent", tr.ReqID, perRequest[tr.ReqID], tr.Spans+tr.Logs)
		}
	}
	if n := neo.Count(t, `MATCH (:Event)-[a:ASYNC_OF]->(:Event) RETURN count(a)`, nil); n == 0 {
		t.Error("neo4j: no ASYNC_OF edge for the async workers' traces")
	}

	conn := col.dialOTLP()
	for range 2 {
		if _, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(causeAndEffect())); err != nil {
			t.Fatal(err)
		}
	}
	if n := waitForCount(`MATCH (:Event)-[c:CAUSED {type: "triggered", rule: "cache_miss_trigger_inference"}]->(:Event) RETURN count(c)`, 1); n != 1 {
		t.Errorf("neo4j: %d CAUSED edges from the cache miss, want 1", n)
	}
	if n := neo.Count(t, events, nil); n != written+2 {
		t.Errorf("neo4j: %d events after sending 2 records twice, want %d: a resend duplicated", n, written+2)
	}

	col.stop()
	store, err := sqlitestore.Open(ctx, filepath.Join(col.dir, "data", "loom-graph.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close(ctx) }()
	for _, tr := range truths {
		timeline, err := store.Timeline(ctx, tr.ReqID)
		if err != nil {
			t.Fatal(err)
		}
		if len(timeline) != tr.Spans+tr.Logs {
			t.Errorf("embedded store: timeline of %s has %d events, %d records were sent", tr.ReqID, len(timeline), tr.Spans+tr.Logs)
		}
	}
}
