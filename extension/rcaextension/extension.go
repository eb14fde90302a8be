package rcaextension

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/exporter/eventgraphexporter"
	"github.com/loom-otel/loom/internal/eventgraph"
)

// rcaExtension serves the page and the API while the collector runs.
type rcaExtension struct {
	cfg *Config
	set extension.Settings

	server  *http.Server
	handler *handler
	addr    net.Addr // where it listens, once started
	done    sync.WaitGroup
}

func newExtension(cfg *Config, set extension.Settings) *rcaExtension {
	return &rcaExtension{cfg: cfg, set: set}
}

func (x *rcaExtension) Start(ctx context.Context, host component.Host) error {
	h := newHandler(x.cfg, x.lookupStore, lookupFailureMap(x.cfg), time.Now)
	x.handler = h
	ln, err := x.cfg.Server.ToListener(ctx)
	if err != nil {
		return err
	}
	x.server, err = x.cfg.Server.ToServer(ctx, host.GetExtensions(), x.set.TelemetrySettings, h)
	if err != nil {
		_ = ln.Close()
		return err
	}
	x.addr = ln.Addr()
	x.set.Logger.Info("Root-cause page: open it in a browser", zap.String("url", pageURL(x.addr, x.cfg.Server.TLS.HasValue())))
	x.done.Add(1)
	go func() {
		defer x.done.Done()
		if err := x.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	return nil
}

func (x *rcaExtension) Shutdown(ctx context.Context) error {
	if x.server == nil {
		return nil
	}
	err := x.server.Shutdown(ctx)
	x.done.Wait()
	x.handler.close()
	return err
}

// lookupStore finds the configured eventgraph exporter's store: it starts
// after extensions do, so it is looked up on every request.
func (x *rcaExtension) lookupStore() (eventgraph.Store, bool) {
	return eventgraphexporter.LookupStore(x.cfg.Graph)
}

func pageURL(addr net.Addr, tls bool) string {
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + addr.String() + "/"
}
