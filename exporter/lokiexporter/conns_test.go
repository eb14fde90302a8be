package lokiexporter

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/loom-otel/loom/exporter/lokiexporter/internal/metadata"
)

func TestShutdownClosesIdleConnections(t *testing.T) {
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(&fakeLoki{t: t})
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	cfg := synchronous(testConfig())
	cfg.ClientConfig.Endpoint = srv.URL
	exp, err := NewFactory().CreateLogs(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, exp.ConsumeLogs(context.Background(), testLogs(goldenRecord("req-1715234890123-a1b2c3", testNow))))

	require.NoError(t, exp.Shutdown(context.Background()))
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the push's keep-alive connection is still open after Shutdown")
	}
}

func TestConnTrackerForgetsOldConnections(t *testing.T) {
	tracker := newConnTracker()
	old, other := &net.TCPConn{}, &net.IPConn{}
	tracker.used(old, testNow)
	tracker.used(other, testNow.Add(connRetention+time.Second))
	require.NotContains(t, tracker.lastUsed, net.Conn(old), "a connection unused for longer than the retention is forgotten")
	require.Contains(t, tracker.lastUsed, net.Conn(other))
}
