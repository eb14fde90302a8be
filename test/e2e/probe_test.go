//go:build e2e

package e2e

// The probe suite of the trust boundary (ARCHITECTURE.md §6): hostile and
// realistic input sent to the built binary as an untrusted client would send
// it, and every output the collector writes read back. Each probe names the
// promise it holds the collector to. The overload probe is cmd/loomperf's
// TestOverloadStaysWithinTheMemoryBound, which needs the load generator.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/neo4j/neo4j-go-driver/v5/neo4j"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	_ "modernc.org/sqlite" // the embedded event graph, read back

	"github.com/loom-otel/loom/internal/canarytest"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jtest"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
)

// probeCanary is the prompt and completion the placements carry.
const probeCanary = "CANARY-PROMPT-7f3a"

// canaryPayloads is one request per content key or PII value and placement,
// each a log payload, a span payload or both, with its own req_id.
type canaryPayloads struct {
	logs   plog.Logs
	traces ptrace.Traces
	// secrets are what must not come out: the canary and each PII value.
	secrets []string
	// logRequests and spanRequests are the req_ids that sent a log record or a span.
	logRequests, spanRequests []string
}

// newCanaryPayloads places the canary under every content key in every
// placement, in every GenAI content event, and every PII value under a plain
// key in every placement.
func newCanaryPayloads() *canaryPayloads {
	p := &canaryPayloads{logs: plog.NewLogs(), traces: ptrace.NewTraces(), secrets: []string{probeCanary}}
	now := time.Now()
	next := func() string {
		return fmt.Sprintf("req-%d-p%05d", now.UnixMilli(), len(p.logRequests)+len(p.spanRequests))
	}
	for _, pl := range canarytest.Placements() {
		for _, key := range canarytest.ContentKeys {
			p.add(next(), pl, key, "say "+probeCanary+" please", now)
		}
		for _, pii := range canarytest.PIIValues {
			p.add(next(), pl, "note", pii, now)
		}
	}
	for _, pii := range canarytest.PIIValues {
		p.secrets = append(p.secrets, canarytest.PIISecret(pii))
	}
	for name, key := range canarytest.ContentEvents {
		td, sp := canarytest.NewSpanParts()
		e := sp.Span.Events().AppendEmpty()
		e.SetName(name)
		e.Attributes().PutStr(key, probeCanary)
		e.Attributes().PutEmptyMap("message").PutStr("content", probeCanary)
		p.addSpan(next(), td, sp, now)
	}
	return p
}

func (p *canaryPayloads) add(reqID string, pl canarytest.Placement, key, value string, at time.Time) {
	ld, lp, td, sp := pl.Place(key, value)
	if pl.Logs != nil {
		lp.Record.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lp.Record.Attributes().PutStr(golden.ReqID, reqID)
		ld.ResourceLogs().MoveAndAppendTo(p.logs.ResourceLogs())
		p.logRequests = append(p.logRequests, reqID)
	}
	if pl.Spans != nil {
		p.addSpan(reqID, td, sp, at)
	}
}

func (p *canaryPayloads) addSpan(reqID string, td ptrace.Traces, sp canarytest.SpanParts, at time.Time) {
	n := len(p.logRequests) + len(p.spanRequests) + 1
	sp.Span.SetTraceID(pcommon.TraceID{0x7f, 0x3a, byte(n >> 16), byte(n >> 8), byte(n), 15: 1})
	sp.Span.SetSpanID(pcommon.SpanID{0x7f, byte(n >> 16), byte(n >> 8), byte(n), 7: 1})
	sp.Span.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
	sp.Span.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Millisecond)))
	sp.Span.Attributes().PutStr(golden.ReqID, reqID)
	td.ResourceSpans().MoveAndAppendTo(p.traces.ResourceSpans())
	p.spanRequests = append(p.spanRequests, reqID)
}

// TestProbeCanariesInEveryPlacement sends a prompt canary under every key
// where LLM instrumentations put content, and PII (emails, phone numbers of
// several countries, API keys, bearer tokens), in every placement of a log
// record and a span, straight to the shipped gateway as a client that
// bypasses the agents would. Every output is read back, byte for byte: Loki's
// push bodies, Tempo's export, a file exporter, the embedded SQLite store
// (file and write-ahead log) and a real Neo4j. No secret may be in any of
// them, and every request must be in each, so that the check is not vacuous.
func TestProbeCanariesInEveryPlacement(t *testing.T) {
	loki, lokiURL := startLokiPushes(t)
	tempo := startSink(t)
	neo := neo4jtest.Shared(t)
	out := t.TempDir()
	graph, file := filepath.Join(out, "graph.db"), filepath.Join(out, "export.json")
	col := startCollector(t, "distribution/gateway.yaml", withEdits(probedGateway(t, lokiURL, tempo), func(cfg map[string]any) {
		exporters := mapAt(cfg, "exporters")
		neoCfg := mapAt(exporters, "eventgraph")
		neoCfg["backend"] = "neo4j"
		neoCfg["neo4j"] = map[string]any{"uri": neo.URI, "username": neo4jtest.Username, "password": neo.Password}
		exporters["eventgraph/embedded"] = map[string]any{"backend": "embedded", "embedded": map[string]any{"path": graph}}
		exporters["file/probe"] = map[string]any{"path": file}
		for _, signal := range []string{"logs", "traces"} {
			pipeline := mapAt(cfg, "service", "pipelines", signal)
			pipeline["exporters"] = append(pipeline["exporters"].([]any), "eventgraph/embedded", "file/probe")
		}
	}))

	payloads := newCanaryPayloads()
	conn := col.dialOTLP()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(payloads.logs)); err != nil {
		t.Fatal(err)
	}
	if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(payloads.traces)); err != nil {
		t.Fatal(err)
	}
	spans := len(payloads.spanRequests)
	if _, err := tempo.WaitFor(ctx, 2*time.Minute, 0, func(c otlpsink.Counts) bool { return c.Spans >= spans }); err != nil {
		t.Fatalf("tempo: %v\ncollector log:\n%s", err, col.log())
	}
	loki.waitForEntries(t, len(payloads.logRequests), 2*time.Minute)
	col.stop() // the event graph's and the file's last writes are flushed

	outputs := map[string][]byte{"loki": loki.dump(), "tempo": tracesJSON(t, tempo.Traces())}
	for name, pattern := range map[string]string{"sqlite": graph + "*", "file": file} {
		files, _ := filepath.Glob(pattern) // the SQLite file and its write-ahead log
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			outputs[name] = append(outputs[name], b...)
		}
	}
	outputs["neo4j"] = neo4jDump(t, neo)

	for output, b := range outputs {
		requests := payloads.spanRequests
		if output == "loki" {
			requests = payloads.logRequests
		} else if output != "tempo" {
			requests = slices.Concat(payloads.logRequests, payloads.spanRequests)
		}
		for _, id := range requests {
			if !bytes.Contains(b, []byte(id)) {
				t.Errorf("%s holds nothing of request %s: the canary check of it would pass vacuously", output, id)
				break
			}
		}
		if !bytes.Contains(b, []byte("SURVIVOR")) {
			t.Errorf("%s lost the plain fields next to the canaries", output)
		}
		for _, secret := range payloads.secrets {
			if i := bytes.Index(b, []byte(secret)); i >= 0 {
				t.Errorf("%q left the gateway in %s: …%q…", secret, output, b[max(0, i-120):min(len(b), i+40)])
			}
		}
	}
	t.Logf("%d requests (%d with a log record, %d with a span), %d secrets, checked in %d outputs",
		len(payloads.logRequests)+len(payloads.spanRequests)-overlap(payloads.logRequests, payloads.spanRequests),
		len(payloads.logRequests), spans, len(payloads.secrets), len(outputs))
}

// probedGateway is the shipped gateway on loopback, keeping every request,
// writing to the Loki fake at lokiURL and to tempo.
func probedGateway(t *testing.T, lokiURL string, tempo *otlpsink.Sink) func(map[string]any) {
	return withEdits(onLoopback(t, "file_storage/queues"), keepEveryRequest, func(cfg map[string]any) {
		exporters := mapAt(cfg, "exporters")
		mapAt(exporters, "loki")["endpoint"] = lokiURL
		tempoCfg := mapAt(exporters, "tempo")
		tempoCfg["endpoint"], tempoCfg["tls"] = tempo.GRPCEndpoint, map[string]any{"insecure": true}
	})
}

// neo4jDump is every node's and edge's labels and properties in neo, as text.
func neo4jDump(t *testing.T, neo *neo4jtest.Server) []byte {
	t.Helper()
	res, err := neo4j.ExecuteQuery(context.Background(), neo.Driver(t),
		`MATCH (n) RETURN labels(n) AS kind, properties(n) AS props
		 UNION ALL MATCH ()-[r]->() RETURN [type(r)] AS kind, properties(r) AS props`,
		nil, neo4j.EagerResultTransformer)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, rec := range res.Records {
		fmt.Fprintln(&b, rec.Values...)
	}
	return b.Bytes()
}

func tracesJSON(t *testing.T, traces []ptrace.Traces) []byte {
	t.Helper()
	var b []byte
	var m ptrace.JSONMarshaler
	for _, td := range traces {
		j, err := m.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, j...)
	}
	return b
}

func overlap(a, b []string) int {
	in := map[string]bool{}
	for _, s := range a {
		in[s] = true
	}
	n := 0
	for _, s := range b {
		if in[s] {
			n++
		}
	}
	return n
}

// probeRequest is a request as the rca API answers it.
type probeRequest struct {
	Events []struct {
		EventID string `json:"event_id"`
		Kind    string `json:"kind"`
		Name    string `json:"name"`
		Message string `json:"message"`
	} `json:"events"`
	Edges []struct {
		From string `json:"from"`
		To   string `json:"to"`
		Type string `json:"type"`
		Rule string `json:"rule"`
	} `json:"edges"`
}

// TestProbeHostileAndForgedIDs sends to the shipped single-node config, whose
// clients are untrusted, records that try to take over another request: a
// log record and a span carrying the victim's event ids, a forged cause and a
// forged async link to it; and records with hostile req_ids: two of 64 KiB
// that share their first 4 KiB, and ids with a newline, NUL, a terminal
// escape, a path, quotes and invalid UTF-8. The victim must keep its events and
// gain no edge; the forged identity must be replaced and counted; no over-long
// id may become a request (cut to a prefix, the two would merge); every
// hostile id must be counted invalid, and the API must answer for each without
// failing.
func TestProbeHostileAndForgedIDs(t *testing.T) {
	col := startCollector(t, "distribution/config.yaml", withEdits(keepEveryRequest))
	base := "http://" + col.endpoints["extensions.rca.endpoint"]
	conn := col.dialOTLP()
	logs, traces := plogotlp.NewGRPCClient(conn), ptraceotlp.NewGRPCClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := time.Now()
	victim, attacker := fmt.Sprintf("req-%d-victim", now.UnixMilli()), fmt.Sprintf("req-%d-attack", now.UnixMilli())

	send := func(reqID string, decorate func(pcommon.Map)) {
		t.Helper()
		ld, lp := canarytest.NewLogParts()
		lp.Record.SetTimestamp(pcommon.NewTimestampFromTime(now))
		lp.Record.Body().SetStr("answered " + reqID)
		lp.Record.Attributes().PutStr(golden.ReqID, reqID)
		td, sp := canarytest.NewSpanParts()
		ids := sha256.Sum256([]byte(reqID))
		sp.Span.SetTraceID(pcommon.TraceID(ids[:16]))
		sp.Span.SetSpanID(pcommon.SpanID(ids[16:24]))
		sp.Span.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
		sp.Span.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
		sp.Span.Attributes().PutStr(golden.ReqID, reqID)
		if decorate != nil {
			decorate(lp.Record.Attributes())
			decorate(sp.Span.Attributes())
		}
		if _, err := logs.Export(ctx, plogotlp.NewExportRequestFromLogs(ld)); err != nil {
			t.Fatalf("%q: %v", reqID, err)
		}
		if _, err := traces.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
			t.Fatalf("%q: %v", reqID, err)
		}
	}
	stored := func(reqID string) probeRequest {
		t.Helper()
		var r probeRequest
		for deadline := time.Now().Add(90 * time.Second); len(r.Events) < 2; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("request %s not in the graph with its 2 events after 90 s\ncollector log:\n%s", reqID, col.log())
			}
			if status, body := get(t, base+"/api/requests/"+url.PathEscape(reqID)); status == http.StatusOK {
				if err := json.Unmarshal(body, &r); err != nil {
					t.Fatal(err)
				}
			}
		}
		return r
	}

	send(victim, nil)
	before := stored(victim)
	var victimIDs []string
	for _, e := range before.Events {
		victimIDs = append(victimIDs, e.EventID)
	}
	send(attacker, func(attrs pcommon.Map) {
		attrs.PutStr(golden.EventID, victimIDs[0])
		parents := attrs.PutEmptySlice(golden.CausalParents)
		rules := attrs.PutEmptySlice(golden.CausalRules)
		for _, id := range victimIDs {
			parents.AppendEmpty().SetStr(id + ":CAUSED")
			rules.AppendEmpty().SetStr("forged")
		}
		attrs.PutStr(golden.StitchAsyncOf, victim)
	})
	longPrefix := "req-" + strings.Repeat("7", 4096)
	hostile := []string{
		longPrefix + strings.Repeat("a", 60<<10), longPrefix + strings.Repeat("b", 60<<10),
		"req-1715234890123-a1b2c3\nlevel=error forged=line", "req-\x00nul", "req-\x1b[31mred", "../../etc/passwd",
		`req-"quoted'`, "req-\xff\xfe-not-utf8",
	}
	for _, id := range hostile {
		send(id, nil)
	}
	after, forged := stored(victim), stored(attacker)

	if len(after.Events) != len(before.Events) {
		t.Errorf("the victim has %d events after the attack, %d before", len(after.Events), len(before.Events))
	}
	for i, e := range after.Events {
		if i < len(before.Events) && e != before.Events[i] {
			t.Errorf("the victim's event changed: %+v, was %+v", e, before.Events[i])
		}
	}
	for _, e := range forged.Events {
		if slices.Contains(victimIDs, e.EventID) {
			t.Errorf("the attacker's %s kept the victim's event id %s", e.Kind, e.EventID)
		}
	}
	for _, r := range []probeRequest{after, forged} {
		for _, edge := range r.Edges {
			if edge.Rule == "forged" || edge.Type == "ASYNC_OF" {
				t.Errorf("a forged edge was written: %+v", edge)
			}
		}
	}
	if removed := scrapeCounter(t, col, "otelcol_processor_reqidstitch_identity_removed"); removed < 2 {
		t.Errorf("identity_removed counts %v, want the attacker's 2 records", removed)
	}

	// The hostile ids: each counted, none failing the API.
	if long := scrapeCounter(t, col, "otelcol_processor_goldenfield_sanitized", `issue="id_too_long"`); long != 4 {
		t.Errorf("id_too_long counts %v, want 4 (a log record and a span of each over-long id)", long)
	}
	if invalid := scrapeCounter(t, col, "otelcol_processor_goldenfield_validation_failures", `field="req_id"`, `reason="invalid"`); invalid < 2*float64(len(hostile)-2) {
		t.Errorf("invalid req_ids counted %v, want at least %d (a log record and a span of each hostile id)", invalid, 2*(len(hostile)-2))
	}
	for _, id := range hostile {
		if status, body := get(t, base+"/api/requests/"+url.PathEscape(id)); status >= 500 {
			t.Errorf("the API failed on %q: %d %s", id, status, body)
		}
	}
	col.stop()

	db, err := sql.Open("sqlite", "file:"+filepath.Join(col.dir, "data", "loom-graph.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	var merged, unrequested int
	if err := db.QueryRow(`SELECT count(*) FROM requests WHERE req_id LIKE 'req-7777%'`).Scan(&merged); err != nil {
		t.Fatal(err)
	}
	if merged != 0 {
		t.Errorf("%d requests were made of the over-long ids", merged)
	}
	if err := db.QueryRow(`SELECT count(*) FROM events WHERE req_id IS NULL AND message LIKE 'answered req-7777%'`).Scan(&unrequested); err != nil {
		t.Fatal(err)
	}
	if unrequested != 2 {
		t.Errorf("%d log records of the over-long ids were stored without a request, want 2", unrequested)
	}
}

// TestProbeTenantsAndOversizedRecords sends to the shipped gateway, with Loki
// and Tempo fakes behind it: records whose resource names their tenant (as
// the agents set it) and whose own attributes name another, which must never
// choose it; a request whose 11 log records include one far over Loki's line
// limit, which must not cost its batch-mates and must be counted; and an
// export over the receiver's message limit, which must be refused to the
// client while the gateway goes on serving.
func TestProbeTenantsAndOversizedRecords(t *testing.T) {
	loki, lokiURL := startLokiPushes(t)
	tempo := startSink(t)
	col := startCollector(t, "distribution/gateway.yaml", withEdits(probedGateway(t, lokiURL, tempo), func(cfg map[string]any) {
		exporters := mapAt(cfg, "exporters")
		mapAt(exporters, "eventgraph")["backend"] = "embedded"
		mapAt(exporters, "eventgraph", "embedded")["path"] = filepath.Join(t.TempDir(), "graph.db")
	}))
	conn := col.dialOTLP()
	logs, traces := plogotlp.NewGRPCClient(conn), ptraceotlp.NewGRPCClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := time.Now()
	reqID := fmt.Sprintf("req-%d-tenant", now.UnixMilli())

	ld, lp := canarytest.NewLogParts()
	lp.Resource.Resource().Attributes().PutStr("tenant_id", "alice")
	const records, oversized = 11, 5
	for i := range records {
		lr := lp.Record
		if i > 0 {
			lr = lp.Scope.LogRecords().AppendEmpty()
		}
		lr.SetTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(i) * time.Millisecond)))
		lr.Attributes().PutStr(golden.ReqID, reqID)
		lr.Attributes().PutStr("tenant_id", "mallory")
		lr.Body().SetStr(fmt.Sprintf("record %d", i))
		if i == oversized {
			lr.Body().SetStr("record 5 " + strings.Repeat("x", 300<<10))
		}
	}
	td, sp := canarytest.NewSpanParts()
	sp.Resource.Resource().Attributes().PutStr("tenant_id", "alice")
	sp.Span.SetTraceID(pcommon.TraceID{0x7e, 15: 1})
	sp.Span.SetSpanID(pcommon.SpanID{0x7e, 7: 1})
	sp.Span.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
	sp.Span.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
	sp.Span.Attributes().PutStr(golden.ReqID, reqID)
	sp.Span.Attributes().PutStr("tenant_id", "mallory")
	if _, err := logs.Export(ctx, plogotlp.NewExportRequestFromLogs(ld)); err != nil {
		t.Fatal(err)
	}
	if _, err := traces.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}

	huge, hp := canarytest.NewLogParts()
	hp.Record.Body().SetStr(strings.Repeat("y", 5<<20))
	_, err := logs.Export(ctx, plogotlp.NewExportRequestFromLogs(huge))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("an export over the receiver's message limit was answered %v, want ResourceExhausted", err)
	}

	loki.waitForEntries(t, records, time.Minute)
	if _, err := tempo.WaitFor(ctx, time.Minute, 0, func(c otlpsink.Counts) bool { return c.Spans >= 1 }); err != nil {
		t.Fatalf("tempo: %v\ncollector log:\n%s", err, col.log())
	}
	tenants, entries := loki.snapshot()
	if len(entries) != records || len(tenants) != 1 || tenants["alice"] == 0 {
		t.Errorf("loki got %d entries under tenants %v, want %d under alice only", len(entries), tenants, records)
	}
	for _, e := range entries {
		if strings.Contains(e.line, "record 5") && len(e.line) > 256<<10 {
			t.Errorf("the oversized record reached Loki with a line of %d bytes, over the 256 KiB limit", len(e.line))
		}
	}
	if truncated := scrapeCounter(t, col, "otelcol_exporter_loki_lines_truncated"); truncated != 1 {
		t.Errorf("lines_truncated counts %v, want the one oversized record", truncated)
	}
	if got := tempo.Tenants(); len(got) != 1 || got["alice"] == 0 {
		t.Errorf("tempo got exports under tenants %v, want alice only", got)
	}
}
