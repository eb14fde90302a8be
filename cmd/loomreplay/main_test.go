package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
)

// receiver is an OTLP/gRPC server on an ephemeral port that keeps what it gets.
type receiver struct {
	ptraceotlp.UnimplementedGRPCServer
	mu     sync.Mutex
	traces []ptrace.Traces
	logs   []plog.Logs
}

func (r *receiver) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.traces = append(r.traces, req.Traces())
	return ptraceotlp.NewExportResponse(), nil
}

type logReceiver struct {
	plogotlp.UnimplementedGRPCServer
	*receiver
}

func (r *logReceiver) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, req.Logs())
	return plogotlp.NewExportResponse(), nil
}

func serve(t *testing.T) (*receiver, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	r := &receiver{}
	ptraceotlp.RegisterGRPCServer(srv, r)
	plogotlp.RegisterGRPCServer(srv, &logReceiver{receiver: r})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r, lis.Addr().String()
}

func TestServiceOfAPod(t *testing.T) {
	assert.Equal(t, "ts-basic-service", serviceOf("ts-basic-service-5dc8d4f9fd-llznp"))
	assert.Equal(t, "redis", serviceOf("redis"))
	assert.Equal(t, "a-b", serviceOf("a-b"))
}

func TestReplayADay(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	nowNanos = func() int64 { return now.UnixNano() }
	t.Cleanup(func() { nowNanos = func() int64 { return time.Now().UnixNano() } })
	r, endpoint := serve(t)
	truth := filepath.Join(t.TempDir(), "truth.jsonl")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), options{dir: "testdata/day", endpoint: endpoint, truth: truth}, &out))
	assert.Contains(t, out.String(), "sent 3 spans and 4 log records of minutes [10_00 10_01] (1 rows that did not parse left out), 1 faults")

	var spans []ptrace.Span
	var services []string
	for _, td := range r.traces {
		for _, rs := range td.ResourceSpans().All() {
			name, _ := rs.Resource().Attributes().Get("service.name")
			for _, span := range rs.ScopeSpans().At(0).Spans().All() {
				spans = append(spans, span)
				services = append(services, name.Str())
			}
		}
	}
	require.Len(t, spans, 3)
	assert.Equal(t, []string{"ts-gateway-service", "ts-order-service", "ts-gateway-service"}, services)
	assert.True(t, spans[0].ParentSpanID().IsEmpty(), "root")
	assert.Equal(t, spans[0].SpanID(), spans[1].ParentSpanID())
	assert.Equal(t, "GET /api/v1/orders", spans[1].Name())
	// The last record (a log line at 10:01:00.5) is now; the others keep their distance.
	assert.Equal(t, now.Add(-500*time.Millisecond), spans[2].StartTimestamp().AsTime())

	var lines []plog.LogRecord
	for _, ld := range r.logs {
		for _, rl := range ld.ResourceLogs().All() {
			for _, lr := range rl.ScopeLogs().At(0).LogRecords().All() {
				lines = append(lines, lr)
			}
		}
	}
	require.Len(t, lines, 4)
	assert.Equal(t, "10:00:00.200 ERROR o.s.OrderServiceImpl#88 TraceID: a14e2f23a3fb3a2778e7aaa5f9f6c19b SpanID: e38339a34bbf8ebd [getOrder][order not found]",
		lines[0].Body().Str(), "the application's line, out of the runtime's JSON")
	assert.Equal(t, "a14e2f23a3fb3a2778e7aaa5f9f6c19b", lines[0].TraceID().String())
	assert.True(t, lines[1].TraceID().IsEmpty(), "a line logged outside any request has no context")
	assert.Equal(t, "a line whose nanoseconds are corrupt", lines[2].Body().Str())
	assert.Equal(t, now.Add(-60100*time.Millisecond), lines[2].Timestamp().AsTime(), "timed by its written timestamp")
	assert.Equal(t, "plain text that is no JSON", lines[3].Body().Str())
	assert.Equal(t, now, lines[3].Timestamp().AsTime())

	raw, err := os.ReadFile(truth)
	require.NoError(t, err)
	var f map[string]string
	require.NoError(t, json.Unmarshal(raw, &f))
	assert.Equal(t, map[string]string{"time": now.Add(-50500 * time.Millisecond).Format(time.RFC3339Nano), "service": "ts-order-service",
		"pod": "ts-order-service-5d7b8c9f4-x2k9q", "type": "network_delay"}, f)
}

func TestReplayOneFault(t *testing.T) {
	d, err := openDay("testdata/day")
	require.NoError(t, err)
	minutes, faults, err := d.selection(1)
	require.NoError(t, err)
	assert.Equal(t, []string{"10_00", "10_01"}, minutes, "the fault's minute and those after, at most three")
	require.Len(t, faults, 1)
	_, _, err = d.selection(2)
	assert.ErrorContains(t, err, "the day has 1 faults")
}

func TestFlags(t *testing.T) {
	for args, want := range map[string]string{
		"":                        "-dir is required",
		"-dir x -fault -1":        "-fault -1",
		"-dir x -speed -2":        "-speed -2",
		"-dir testdata/nosuchday": "want one *fault_list.json",
	} {
		o, err := parseFlags(strings.Fields(args), &bytes.Buffer{})
		if err == nil {
			err = run(context.Background(), o, &bytes.Buffer{})
		}
		assert.ErrorContains(t, err, want, args)
	}
}

// A paced replay keeps the recorded spacing, divided by the speed, and
// waits out a recorded silence of at most maxGap.
func TestPacedReplay(t *testing.T) {
	r, endpoint := serve(t)
	start := time.Now()
	require.NoError(t, run(context.Background(), options{dir: "testdata/day", endpoint: endpoint, speed: 60}, &bytes.Buffer{}))
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, maxGap/60, "the minute's silence, cut to maxGap, at 60×")
	assert.Less(t, took, 59*time.Second/60, "not the whole minute")
	assert.Len(t, r.traces, 2)
}

func FuzzReadRows(f *testing.F) {
	for _, path := range []string{"testdata/day/trace/10_00_trace.csv", "testdata/day/log/10_00_log.csv"} {
		raw, err := os.ReadFile(path)
		require.NoError(f, err)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var out []record
		_, _ = readSpans(bytes.NewReader(raw), &out)
		_, _ = readLogs(bytes.NewReader(raw), &out)
		b := newBatch()
		for i := range out {
			b.add(&out[i], 0)
		}
	})
}
