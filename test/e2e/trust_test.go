//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
)

// The canaries: a prompt, a completion and PII that must never leave.
const (
	promptCanary     = "CANARY-PROMPT-7f3a"
	completionCanary = "CANARY-COMPLETION-91bd"
	emailCanary      = "canary.person@example.org"
)

// TestGatewayRedactsClientsThatSkipTheAgent sends records straight to a
// gateway, as a client that bypasses the agents would, with prompts where
// LLM instrumentations put them (indexed and OpenInference attributes, a
// nested map, the resource, a JSON body, span events and links) and PII: no
// canary byte reaches Loki's push bodies, Tempo's export or the event graph
// file.
func TestGatewayRedactsClientsThatSkipTheAgent(t *testing.T) {
	loki := &lokiPushes{t: t, tenants: map[string]int{}}
	lokiServer := httptest.NewServer(loki)
	defer lokiServer.Close()
	tempo := startSink(t)
	graph := filepath.Join(t.TempDir(), "graph.db")
	col := startCollector(t, "distribution/gateway.yaml", withEdits(onLoopback(t, "file_storage/queues"), func(cfg map[string]any) {
		keepEveryRequest(cfg)
		exporters := mapAt(cfg, "exporters")
		mapAt(exporters, "loki")["endpoint"] = lokiServer.URL
		tempoCfg := mapAt(exporters, "tempo")
		tempoCfg["endpoint"], tempoCfg["tls"] = tempo.GRPCEndpoint, map[string]any{"insecure": true}
		graphCfg := mapAt(exporters, "eventgraph")
		graphCfg["backend"], graphCfg["embedded"] = "embedded", map[string]any{"path": graph}
	}))

	conn := col.dialOTLP()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(canaryLogs()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(canaryTraces()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tempo.WaitFor(ctx, time.Minute, 0, func(c otlpsink.Counts) bool { return c.Spans >= 1 }); err != nil {
		t.Fatalf("tempo: %v\ncollector log:\n%s", err, col.log())
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, entries := loki.snapshot(); len(entries) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	col.stop() // the event graph's last writes are flushed

	var out bytes.Buffer
	_, entries := loki.snapshot()
	if len(entries) < 2 {
		t.Fatalf("loki got %d entries, want 2\ncollector log:\n%s", len(entries), col.log())
	}
	for _, e := range entries {
		out.WriteString(e.labels + e.line)
		for k, v := range e.metadata {
			out.WriteString(k + v)
		}
	}
	var spans ptrace.JSONMarshaler
	for _, td := range tempo.Traces() {
		b, err := spans.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	files, _ := filepath.Glob(graph + "*") // the file and its write-ahead log
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	if !bytes.Contains(out.Bytes(), []byte("req-1746792000000-trust1")) {
		t.Fatal("the outputs hold nothing of the request: the check below would pass vacuously")
	}
	for _, canary := range []string{promptCanary, completionCanary, emailCanary} {
		if i := bytes.Index(out.Bytes(), []byte(canary)); i >= 0 {
			t.Errorf("%s left the gateway: …%s…", canary, out.Bytes()[max(0, i-80):min(out.Len(), i+40)])
		}
	}
}

func canaryLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "chat-api")
	rl.Resource().Attributes().PutStr("llm.prompts", promptCanary)
	records := rl.ScopeLogs().AppendEmpty().LogRecords()
	at := pcommon.NewTimestampFromTime(time.Now())

	lr := records.AppendEmpty()
	lr.SetTimestamp(at)
	lr.Attributes().PutStr(golden.ReqID, "req-1746792000000-trust1")
	lr.Attributes().PutStr("gen_ai.prompt.0.content", promptCanary)
	lr.Attributes().PutStr("gen_ai.completion.0.content", completionCanary)
	lr.Attributes().PutStr("llm.input_messages.0.message.content", promptCanary)
	lr.Attributes().PutStr("user.contact", "write to "+emailCanary)
	request := lr.Attributes().PutEmptyMap("request")
	request.PutEmptyMap("body").PutStr("prompt", promptCanary)
	lr.Body().SetStr("answered")

	deep := records.AppendEmpty()
	deep.SetTimestamp(at)
	deep.Attributes().PutStr(golden.ReqID, "req-1746792000000-trust1")
	deep.Body().SetStr(`{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"prompt":"` + promptCanary + `"}}}}}}},"output.value":"` + completionCanary + `","note":"mail ` + emailCanary + `"}`)
	return ld
}

func canaryTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "chat-api")
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	span.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
	now := time.Now()
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Second)))
	span.SetName("chat " + emailCanary)
	span.Attributes().PutStr(golden.ReqID, "req-1746792000000-trust1")
	span.Attributes().PutStr("input.value", promptCanary)
	span.Attributes().PutStr("output.value", completionCanary)
	event := span.Events().AppendEmpty()
	event.SetName("gen_ai.content.prompt")
	event.Attributes().PutStr("gen_ai.prompt", promptCanary)
	link := span.Links().AppendEmpty()
	link.Attributes().PutStr("gen_ai.completion.0.content", completionCanary)
	span.Status().SetMessage("failed for " + emailCanary)
	return td
}
