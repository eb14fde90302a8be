// Package otlpsink is an in-process OTLP receiver for tests and benchmarks: it
// accepts logs, traces and metrics over OTLP/gRPC and OTLP/HTTP (protobuf) on
// loopback, keeps the logs and traces it received, so a test can assert exactly
// what a client or a collector sent, and counts metric data points.
package otlpsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Sink holds what was received. The zero value is not usable: use Start.
type Sink struct {
	// GRPCEndpoint and HTTPEndpoint are host:port addresses on 127.0.0.1.
	GRPCEndpoint string
	HTTPEndpoint string

	grpcServer *grpc.Server
	httpServer *http.Server

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every receipt
	logs    []plog.Logs
	traces  []tenantTraces
	counts  Counts
	tenants map[string]int // export requests by X-Scope-OrgID ("" when absent)
	// keep=false counts records without storing them (benchmarks).
	keep bool
}

// tenantTraces is one traces payload with the X-Scope-OrgID it came with.
type tenantTraces struct {
	tenant string
	td     ptrace.Traces
}

// Counts are the numbers of records received so far.
type Counts struct {
	LogRecords, Spans, DataPoints int
	Requests                      int
}

// Start listens on two free loopback ports. With keep false only counts are kept.
func Start(keep bool) (*Sink, error) {
	grpcLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		grpcLn.Close()
		return nil, err
	}
	s := &Sink{
		GRPCEndpoint: grpcLn.Addr().String(),
		HTTPEndpoint: httpLn.Addr().String(),
		grpcServer:   grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20)),
		changed:      make(chan struct{}),
		tenants:      map[string]int{},
		keep:         keep,
	}
	plogotlp.RegisterGRPCServer(s.grpcServer, &logsServer{s: s})
	ptraceotlp.RegisterGRPCServer(s.grpcServer, &tracesServer{s: s})
	pmetricotlp.RegisterGRPCServer(s.grpcServer, &metricsServer{s: s})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/logs", s.serveHTTP(func(_ string, body []byte) error {
		req := plogotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			return err
		}
		s.addLogs(req.Logs())
		return nil
	}))
	mux.HandleFunc("POST /v1/traces", s.serveHTTP(func(tenant string, body []byte) error {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			return err
		}
		s.addTraces(tenant, req.Traces())
		return nil
	}))
	mux.HandleFunc("POST /v1/metrics", s.serveHTTP(func(_ string, body []byte) error {
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			return err
		}
		s.addMetrics(req.Metrics())
		return nil
	}))
	s.httpServer = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.grpcServer.Serve(grpcLn) }()
	go func() { _ = s.httpServer.Serve(httpLn) }()
	return s, nil
}

// Close stops both servers.
func (s *Sink) Close() {
	s.grpcServer.Stop()
	_ = s.httpServer.Close()
}

// serveHTTP answers one OTLP/HTTP signal; decode gets the request's tenant and body.
func (s *Sink) serveHTTP(decode func(tenant string, body []byte) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "sink accepts only application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err == nil {
			tenant := r.Header.Get(tenantHeader)
			s.countTenant(tenant)
			err = decode(tenant, body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}
}

// tenantHeader is how Loki, Tempo and Mimir name the tenant of a request.
const tenantHeader = "X-Scope-OrgID"

func (s *Sink) countTenant(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenants[tenant]++
}

// countGRPCTenant counts a gRPC export request by its tenant and returns the tenant.
func (s *Sink) countGRPCTenant(ctx context.Context) string {
	tenant := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if values := md.Get(tenantHeader); len(values) > 0 {
			tenant = values[0]
		}
	}
	s.countTenant(tenant)
	return tenant
}

// Tenants returns the number of export requests received per X-Scope-OrgID
// header value ("" for requests without one).
func (s *Sink) Tenants() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.tenants)
}

func (s *Sink) addLogs(ld plog.Logs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.LogRecords += ld.LogRecordCount()
	if s.keep {
		kept := plog.NewLogs()
		ld.CopyTo(kept)
		s.logs = append(s.logs, kept)
	}
	s.notifyLocked()
}

func (s *Sink) addTraces(tenant string, td ptrace.Traces) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Spans += td.SpanCount()
	if s.keep {
		kept := ptrace.NewTraces()
		td.CopyTo(kept)
		s.traces = append(s.traces, tenantTraces{tenant: tenant, td: kept})
	}
	s.notifyLocked()
}

func (s *Sink) addMetrics(md pmetric.Metrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.DataPoints += md.DataPointCount()
	s.notifyLocked()
}

func (s *Sink) notifyLocked() {
	s.counts.Requests++
	close(s.changed)
	s.changed = make(chan struct{})
}

// Counts returns the numbers received so far.
func (s *Sink) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Logs returns every logs payload received so far (only with keep).
func (s *Sink) Logs() []plog.Logs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]plog.Logs(nil), s.logs...)
}

// Traces returns every traces payload received so far (only with keep).
func (s *Sink) Traces() []ptrace.Traces {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ptrace.Traces, len(s.traces))
	for i, t := range s.traces {
		out[i] = t.td
	}
	return out
}

// TracesByTenant returns every traces payload received so far by the
// X-Scope-OrgID it came with ("" for none; only with keep).
func (s *Sink) TracesByTenant() map[string][]ptrace.Traces {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]ptrace.Traces{}
	for _, t := range s.traces {
		out[t.tenant] = append(out[t.tenant], t.td)
	}
	return out
}

// ErrTimeout is returned by WaitFor when the condition did not hold in time.
var ErrTimeout = errors.New("otlpsink: timed out")

// WaitFor blocks until done(counts) holds, ctx ends or timeout passes; then it
// waits quiet for settle more to catch records that should not have come (duplicates).
func (s *Sink) WaitFor(ctx context.Context, timeout, settle time.Duration, done func(Counts) bool) (Counts, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		counts, changed := s.counts, s.changed
		s.mu.Unlock()
		if done(counts) {
			select {
			case <-time.After(settle):
				return s.Counts(), nil
			case <-ctx.Done():
				return s.Counts(), ctx.Err()
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			return counts, fmt.Errorf("%w after %s with %+v", ErrTimeout, timeout, counts)
		case <-ctx.Done():
			return counts, ctx.Err()
		}
	}
}

// The gRPC servers hand over requests that are reused after Export returns,
// so the add* methods copy what they keep.

type logsServer struct {
	plogotlp.UnimplementedGRPCServer
	s *Sink
}

func (l *logsServer) Export(ctx context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	l.s.countGRPCTenant(ctx)
	l.s.addLogs(req.Logs())
	return plogotlp.NewExportResponse(), nil
}

type tracesServer struct {
	ptraceotlp.UnimplementedGRPCServer
	s *Sink
}

func (t *tracesServer) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	t.s.addTraces(t.s.countGRPCTenant(ctx), req.Traces())
	return ptraceotlp.NewExportResponse(), nil
}

type metricsServer struct {
	pmetricotlp.UnimplementedGRPCServer
	s *Sink
}

func (m *metricsServer) Export(ctx context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	m.s.countGRPCTenant(ctx)
	m.s.addMetrics(req.Metrics())
	return pmetricotlp.NewExportResponse(), nil
}
