package eventgraphexporter

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/loom-otel/loom/exporter/eventgraphexporter/internal/metadatatest"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jtest"
)

// pipeline is one eventgraph component in a logs and a traces pipeline, as
// the collector builds it: one factory, one component ID, two exporters.
type pipeline struct {
	logs   exporter.Logs
	traces exporter.Traces
	tt     *componenttest.Telemetry
	host   *statusHost
}

func startPipeline(t testing.TB, cfg *Config, host *statusHost) *pipeline {
	t.Helper()
	ctx := context.Background()
	p := &pipeline{tt: componenttest.NewTelemetry(), host: host}
	if p.host == nil {
		p.host = &statusHost{}
	}
	f := NewFactory()
	set := metadatatest.NewSettings(p.tt)
	var err error
	p.logs, err = f.CreateLogs(ctx, set, cfg)
	require.NoError(t, err)
	p.traces, err = f.CreateTraces(ctx, set, cfg)
	require.NoError(t, err)
	require.NoError(t, p.logs.Start(ctx, p.host))
	require.NoError(t, p.traces.Start(ctx, p.host))
	t.Cleanup(func() { p.shutdown(t) })
	return p
}

// shutdown is idempotent, so that a test can shut down early and read the store.
func (p *pipeline) shutdown(t testing.TB) {
	if p.logs == nil {
		return
	}
	ctx := context.Background()
	require.NoError(t, p.logs.Shutdown(ctx))
	require.NoError(t, p.traces.Shutdown(ctx))
	require.NoError(t, p.tt.Shutdown(ctx))
	p.logs, p.traces = nil, nil
}

// embeddedConfig writes to a file in the test's directory, synchronously:
// without a queue, ConsumeLogs returns the write's own outcome.
func embeddedConfig(t testing.TB) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Embedded.Path = filepath.Join(t.TempDir(), "graph", "loom-graph.db")
	// The tests' records are older than the default max_age: retention would race with the reads.
	cfg.Embedded.Retention = RetentionConfig{}
	return synchronous(cfg)
}

func neo4jConfig(srv *neo4jtest.Server) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Backend = BackendNeo4j
	cfg.Neo4j.URI = srv.URI
	cfg.Neo4j.Username = neo4jtest.Username
	cfg.Neo4j.Password = configopaque.String(srv.Password)
	cfg.Neo4j.Batch.MaxWait = 10 * time.Millisecond // one caller at a time: a long wait only slows the test
	return synchronous(cfg)
}

func synchronous(cfg *Config) *Config {
	cfg.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	cfg.RetryConfig.Enabled = false
	return cfg
}

// statusHost records the statuses its components report.
type statusHost struct {
	extensions map[component.ID]component.Component
	mu         sync.Mutex
	statuses   []componentstatus.Status
}

func (h *statusHost) GetExtensions() map[component.ID]component.Component { return h.extensions }

func (h *statusHost) Report(e *componentstatus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.statuses = append(h.statuses, e.Status())
}

func (h *statusHost) reported() []componentstatus.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]componentstatus.Status(nil), h.statuses...)
}

// switchProxy forwards TCP connections to a target while up; while down it
// refuses them (closes at once) and cuts the open ones: a database outage.
type switchProxy struct {
	addr   string
	target string
	ln     net.Listener
	up     atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t testing.TB, target string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &switchProxy{addr: ln.Addr().String(), target: target, ln: ln}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *switchProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.up.Load() {
			_ = client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(server, client); _ = server.Close() })
		p.wg.Go(func() { _, _ = io.Copy(client, server); _ = client.Close() })
	}
}

func (p *switchProxy) set(up bool) {
	p.up.Store(up)
	if !up {
		p.cut()
	}
}

func (p *switchProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *switchProxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}
