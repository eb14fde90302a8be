//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
)

// lokiPushes is a Loki push endpoint as documented: snappy-compressed protobuf
// PushRequests on /loki/api/v1/push, answered 204.
type lokiPushes struct {
	t       *testing.T
	mu      sync.Mutex
	tenants map[string]int
	entries []lokiEntry
}

type lokiEntry struct {
	tenant    string // the push's X-Scope-OrgID
	labels    string
	metadata  map[string]string
	line      string
	timestamp time.Time
}

func (l *lokiPushes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req push.PushRequest
	if err == nil && (r.URL.Path != "/loki/api/v1/push" || r.Header.Get("Content-Type") != "application/x-protobuf") {
		err = fmt.Errorf("not a Loki protobuf push: %s %s", r.URL.Path, r.Header.Get("Content-Type"))
	}
	if err == nil {
		var raw []byte
		if raw, err = snappy.Decode(nil, body); err == nil {
			err = req.Unmarshal(raw)
		}
	}
	if err != nil {
		l.t.Errorf("loki push: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tenant := r.Header.Get("X-Scope-OrgID")
	l.tenants[tenant]++
	for _, stream := range req.Streams {
		for _, e := range stream.Entries {
			md := map[string]string{}
			for _, kv := range e.StructuredMetadata {
				md[kv.Name] = kv.Value
			}
			l.entries = append(l.entries, lokiEntry{tenant: tenant, labels: stream.Labels, metadata: md, line: e.Line, timestamp: e.Timestamp})
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (l *lokiPushes) snapshot() (map[string]int, []lokiEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.tenants), append([]lokiEntry(nil), l.entries...)
}

// startLokiPushes serves a fake Loki push API for the test and returns it with its base URL.
func startLokiPushes(t *testing.T) (*lokiPushes, string) {
	loki := &lokiPushes{t: t, tenants: map[string]int{}}
	server := httptest.NewServer(loki)
	t.Cleanup(server.Close)
	return loki, server.URL
}

// waitForEntries polls until Loki got at least n entries, or fails the test after timeout.
func (l *lokiPushes) waitForEntries(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		_, entries := l.snapshot()
		if len(entries) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("loki got %d entries in %s, want %d", len(entries), timeout, n)
		}
	}
}

// dump is every entry's tenant, labels, structured metadata and line, as text.
func (l *lokiPushes) dump() []byte {
	var b bytes.Buffer
	_, entries := l.snapshot()
	for _, e := range entries {
		fmt.Fprintln(&b, e.tenant, e.labels, e.metadata, e.line)
	}
	return b.Bytes()
}

// TestLokiAndTempoFindEveryRecordByReqID sends the S1–S3 mix through the default
// pipeline with the loki and tempo exporters added, and checks that Loki's
// structured metadata and Tempo's span attributes find every record of every
// request by its req_id, while stream labels stay bounded.
func TestLokiAndTempoFindEveryRecordByReqID(t *testing.T) {
	loki := &lokiPushes{t: t, tenants: map[string]int{}}
	lokiServer := httptest.NewServer(loki)
	defer lokiServer.Close()
	tempo := startSink(t)

	col := startCollector(t, "distribution/config.yaml", func(cfg map[string]any) {
		keepEveryRequest(cfg)
		tenant := map[string]any{"default": "loom-e2e"}
		exporters := mapAt(cfg, "exporters")
		exporters["loki"] = map[string]any{"endpoint": lokiServer.URL, "tenant": tenant}
		exporters["tempo"] = map[string]any{"endpoint": tempo.GRPCEndpoint, "tls": map[string]any{"insecure": true}, "tenant": tenant}
		for pipeline, exporter := range map[string]string{"logs": "loki", "traces": "tempo"} {
			p := mapAt(cfg, "service", "pipelines", pipeline)
			p["exporters"] = append(p["exporters"].([]any), exporter)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sent, truths := sendWorkload(t, col, workload.GRPC, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12,
		Requests:  1000,
		Seed:      7,
	})

	if _, err := tempo.WaitFor(ctx, time.Minute, 0, func(c otlpsink.Counts) bool { return c.Spans >= sent.Spans }); err != nil {
		t.Fatalf("tempo: %v\ncollector log:\n%s", err, col.log())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, entries := loki.snapshot()
		if len(entries) >= sent.Logs || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // longer than reqidstitch holds a record; anything more would be a duplicate

	tenants, entries := loki.snapshot()
	if len(tenants) != 1 || tenants["loom-e2e"] == 0 {
		t.Errorf("loki pushes by tenant %v, want all for loom-e2e", tenants)
	}
	entriesByReq := map[string]int{}
	labelSets := map[string]bool{}
	for _, e := range entries {
		labelSets[e.labels] = true
		if strings.Contains(e.labels, golden.ReqID) || strings.Contains(e.labels, "req-") {
			t.Fatalf("a request id reached the stream labels: %s", e.labels)
		}
		if id, ok := e.metadata[golden.ReqID]; ok {
			entriesByReq[id]++
		}
	}
	// service_name × level, plus the drift records' stream.
	if len(labelSets) > 40 {
		t.Errorf("%d distinct label sets for %d entries: labels are not bounded", len(labelSets), len(entries))
	}

	if tt := tempo.Tenants(); len(tt) != 1 || tt["loom-e2e"] == 0 {
		t.Errorf("tempo exports by tenant %v, want all for loom-e2e", tt)
	}
	spansByReq := map[string]int{}
	for _, td := range tempo.Traces() {
		forEachSpan(td, func(span ptrace.Span) {
			if id, ok := span.Attributes().Get(golden.ReqID); ok {
				spansByReq[id.Str()]++
			}
		})
	}

	for _, tr := range truths {
		if entriesByReq[tr.ReqID] != tr.Logs {
			t.Errorf("loki: %d entries carry req_id=%s in structured metadata, %d records of it were sent", entriesByReq[tr.ReqID], tr.ReqID, tr.Logs)
		}
		if spansByReq[tr.ReqID] != tr.Spans {
			t.Errorf("tempo: %d spans carry span.req_id=%s, %d were sent", spansByReq[tr.ReqID], tr.ReqID, tr.Spans)
		}
	}
	t.Logf("loki: %d entries in %d streams; tempo: %d spans", len(entries), len(labelSets), tempo.Counts().Spans)
}
