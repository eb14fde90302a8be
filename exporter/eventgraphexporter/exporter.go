package eventgraphexporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/exporter/eventgraphexporter/internal/metadata"
	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/neo4jstore"
	"github.com/loom-otel/loom/internal/eventgraph/sqlitestore"
)

var errNotStarted = errors.New("eventgraph: the exporter is not started")

// The embedded store's write groups: SQLite writes fastest in big
// transactions, and a push never waits for others to join it.
const (
	embeddedMaxRows               = 10_000
	embeddedMaxWait time.Duration = 0
)

// schemaTimeout bounds the schema check at start; a database that is down
// then gets its schema before the first write that reaches it.
const schemaTimeout = 10 * time.Second

// graphExporter is shared by the logs and traces exporters of one component
// ID: one store, one writer.
type graphExporter struct {
	cfg       *Config
	settings  exporter.Settings
	telemetry *metadata.TelemetryBuilder
	conv      converter
	// release drops one of the exporters sharing it and reports whether it
	// was the last.
	release func() bool

	mu        sync.Mutex
	hosts     []component.Host
	backend   eventgraph.Backend
	writer    *groupWriter
	stopPrune context.CancelFunc
	pruneDone chan struct{}

	unhealthy atomic.Bool
}

func newGraphExporter(cfg *Config, set exporter.Settings) (*graphExporter, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &graphExporter{cfg: cfg, settings: set, telemetry: tb, conv: newConverter(cfg.MaxPropertyBytes)}, nil
}

// start opens the store on the first start of the component's exporters.
func (e *graphExporter) start(ctx context.Context, host component.Host) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hosts = append(e.hosts, host)
	if e.writer != nil {
		return nil
	}
	var err error
	maxRows, maxWait := embeddedMaxRows, embeddedMaxWait
	if e.cfg.Backend == BackendNeo4j {
		e.backend, err = e.openNeo4j(ctx)
		maxRows, maxWait = e.cfg.Neo4j.Batch.MaxRows, e.cfg.Neo4j.Batch.MaxWait
	} else {
		e.backend, err = e.openEmbedded(ctx)
	}
	if err != nil {
		return err
	}
	e.writer = newGroupWriter(e.backend, maxRows, maxWait, e.cfg.TimeoutConfig.Timeout)
	registerStore(e.settings.ID, e.backend)
	return nil
}

func (e *graphExporter) openNeo4j(ctx context.Context) (eventgraph.Backend, error) {
	n := e.cfg.Neo4j
	var tlsCfg *tls.Config
	if u, err := url.Parse(n.URI); err == nil && boltSchemes[u.Scheme] {
		if tlsCfg, err = n.TLS.LoadTLSConfig(ctx); err != nil {
			return nil, fmt.Errorf("neo4j::tls: %w", err)
		}
	}
	info := e.settings.BuildInfo
	store, err := neo4jstore.Open(neo4jstore.Config{
		URI: n.URI, Username: n.Username, Password: string(n.Password), Database: n.Database,
		TLS: tlsCfg, MaxRows: n.Batch.MaxRows, UserAgent: info.Command + "/" + info.Version, OnReject: e.countRefused,
	})
	if err != nil {
		return nil, err
	}
	schemaCtx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	if err := store.EnsureSchema(schemaCtx); err != nil {
		e.settings.Logger.Warn("Neo4j is not reachable yet; records wait in the queue and the schema is created with the first write",
			zap.String("uri", n.URI), zap.Error(err))
	}
	return store, nil
}

func (e *graphExporter) openEmbedded(ctx context.Context) (eventgraph.Backend, error) {
	c := e.cfg.Embedded
	if err := os.MkdirAll(filepath.Dir(c.Path), 0o750); err != nil {
		return nil, fmt.Errorf("embedded::path: %w", err)
	}
	store, err := sqlitestore.Open(ctx, c.Path, sqlitestore.Options{MaxAge: c.Retention.MaxAge, MaxBytes: c.Retention.MaxBytes,
		OnReject: e.countRefused})
	if err != nil {
		return nil, fmt.Errorf("embedded::path: %w", err)
	}
	if c.Retention.MaxAge > 0 || c.Retention.MaxBytes > 0 {
		pruneCtx, cancel := context.WithCancel(context.Background())
		e.stopPrune, e.pruneDone = cancel, make(chan struct{})
		go e.prune(pruneCtx, store, c.Retention.CheckInterval)
	}
	return store, nil
}

// countRefused counts an event the store refused (another request holds its id).
func (e *graphExporter) countRefused(eventgraph.Event) {
	e.telemetry.ExporterEventgraphEventsRefused.Add(context.Background(), 1)
}

// prune applies the retention bounds now and every interval until ctx ends.
func (e *graphExporter) prune(ctx context.Context, store *sqlitestore.Store, interval time.Duration) {
	defer close(e.pruneDone)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		deleted, err := store.Prune(ctx, time.Now())
		e.telemetry.ExporterEventgraphEventsPruned.Add(ctx, deleted)
		if err != nil && ctx.Err() == nil {
			e.settings.Logger.Warn("Applying the embedded graph's retention failed", zap.Error(err))
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}

// shutdown closes the store when the component's last exporter shuts down.
func (e *graphExporter) shutdown(ctx context.Context) error {
	if !e.release() {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.writer != nil {
		e.writer.close()
	}
	if e.stopPrune != nil {
		e.stopPrune()
		<-e.pruneDone
	}
	var err error
	if e.backend != nil {
		unregisterStore(e.settings.ID, e.backend)
		err = e.backend.Close(ctx)
	}
	e.telemetry.Shutdown()
	return err
}

func (e *graphExporter) pushLogs(ctx context.Context, ld plog.Logs) error {
	events, stats := e.conv.logs(ld)
	return e.write(ctx, events, stats)
}

func (e *graphExporter) pushTraces(ctx context.Context, td ptrace.Traces) error {
	events, stats := e.conv.traces(td)
	return e.write(ctx, events, stats)
}

// write hands the events to the writer and classifies its outcome for
// exporterhelper: permanent errors drop the records, others are retried.
func (e *graphExporter) write(ctx context.Context, events []eventgraph.Event, st convStats) error {
	if len(events) == 0 {
		return nil
	}
	e.mu.Lock()
	w := e.writer
	e.mu.Unlock()
	if w == nil {
		return errNotStarted
	}
	err := w.write(ctx, events)
	e.reportHealth(err)
	if err != nil {
		kind := "retryable"
		if eventgraph.IsPermanent(err) {
			kind = "permanent"
			err = consumererror.NewPermanent(err)
		}
		e.telemetry.ExporterEventgraphWriteErrors.Add(ctx, 1, metric.WithAttributes(attribute.String("error_kind", kind)))
		return err
	}
	t := e.telemetry
	t.ExporterEventgraphEventsWritten.Add(ctx, int64(len(events)))
	t.ExporterEventgraphEdgesWritten.Add(ctx, int64(st.edges))
	t.ExporterEventgraphEventIdsComputed.Add(ctx, int64(st.idsComputed))
	t.ExporterEventgraphPropertiesTruncated.Add(ctx, int64(st.truncated))
	t.ExporterEventgraphPropertiesSanitized.Add(ctx, int64(st.sanitized))
	t.ExporterEventgraphReferencesInvalid.Add(ctx, int64(st.invalidRefs))
	return nil
}

// reportHealth reports a recoverable error while the store cannot be written
// (unreachable, timing out) and OK again once a write succeeds. A permanent
// error is about one batch's data, not the store's health.
func (e *graphExporter) reportHealth(err error) {
	unhealthy := err != nil && !eventgraph.IsPermanent(err)
	if e.unhealthy.Swap(unhealthy) == unhealthy {
		return
	}
	event := componentstatus.NewEvent(componentstatus.StatusOK)
	if unhealthy {
		event = componentstatus.NewRecoverableErrorEvent(err)
	}
	e.mu.Lock()
	hosts := e.hosts
	e.mu.Unlock()
	for _, h := range hosts {
		componentstatus.ReportStatus(h, event)
	}
}
