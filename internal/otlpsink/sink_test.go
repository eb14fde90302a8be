package otlpsink

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

func someLogs(n int) plog.Logs {
	ld := plog.NewLogs()
	records := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for range n {
		records.AppendEmpty().Body().SetStr("hello")
	}
	return ld
}

func TestSinkReceivesOverGRPCAndHTTP(t *testing.T) {
	s, err := Start(true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	conn, err := grpc.NewClient(s.GRPCEndpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tenantCtx := metadata.AppendToOutgoingContext(ctx, "X-Scope-OrgID", "team-a")
	if _, err := plogotlp.NewGRPCClient(conn).Export(tenantCtx, plogotlp.NewExportRequestFromLogs(someLogs(3))); err != nil {
		t.Fatal(err)
	}
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("s")
	if _, err := ptraceotlp.NewGRPCClient(conn).Export(tenantCtx, ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}

	body, err := plogotlp.NewExportRequestFromLogs(someLogs(2)).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+s.HTTPEndpoint+"/v1/logs", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP status %d", resp.StatusCode)
	}
	resp, err = http.Post("http://"+s.HTTPEndpoint+"/v1/logs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("a JSON body got status %d, want 415", resp.StatusCode)
	}

	got, err := s.WaitFor(ctx, 5*time.Second, 0, func(c Counts) bool { return c.LogRecords == 5 && c.Spans == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if got.Requests != 3 || len(s.Logs()) != 2 || len(s.Traces()) != 1 {
		t.Fatalf("counts %+v, kept %d logs and %d traces payloads", got, len(s.Logs()), len(s.Traces()))
	}
	if tenants := s.Tenants(); tenants["team-a"] != 2 || tenants[""] != 1 {
		t.Fatalf("tenants %v, want two team-a requests and one without a tenant", tenants)
	}
	if byTenant := s.TracesByTenant(); len(byTenant) != 1 || len(byTenant["team-a"]) != 1 {
		t.Fatalf("traces by tenant %v, want the one payload under team-a", byTenant)
	}
	if b := s.Logs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body().Str(); b != "hello" {
		t.Fatalf("kept body %q", b)
	}
}

func TestWaitForTimesOut(t *testing.T) {
	s, err := Start(false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.WaitFor(context.Background(), 50*time.Millisecond, 0, func(c Counts) bool { return c.LogRecords > 0 })
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitFor = %v, want ErrTimeout", err)
	}
}
