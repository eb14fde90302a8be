package lokiexporter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/memstorage"
)

// TestPersistentQueueSurvivesRestart: records queued while Loki is down are
// pushed by the next exporter instance that opens the same storage.
func TestPersistentQueueSurvivesRestart(t *testing.T) {
	var up atomic.Bool
	loki := &fakeLoki{t: t, respond: func(int, received) (int, http.Header, string) {
		if !up.Load() {
			return http.StatusServiceUnavailable, nil, "down"
		}
		return http.StatusNoContent, nil, ""
	}}
	srv := httptest.NewServer(loki)
	defer srv.Close()

	storageID := component.MustNewIDWithName("file_storage", "loki")
	host := memstorage.Host{storageID: memstorage.New()}
	cfg := testConfig()
	cfg.ClientConfig.Endpoint = srv.URL
	cfg.QueueConfig.Get().StorageID = &storageID
	cfg.QueueConfig.Get().Batch.Get().FlushTimeout = 10 * time.Millisecond
	cfg.RetryConfig.InitialInterval = time.Minute // the first instance never gets to retry

	set := exportertest.NewNopSettings(NewFactory().Type()) // one component ID for both instances
	start := func() exporter.Logs {
		exp, err := NewFactory().CreateLogs(context.Background(), set, cfg)
		require.NoError(t, err)
		require.NoError(t, exp.Start(context.Background(), host))
		return exp
	}

	first := start()
	require.NoError(t, first.ConsumeLogs(context.Background(), testLogs(goldenRecord("req-1715234890123-a1b2c3", testNow))))
	require.Eventually(t, func() bool { return len(loki.received()) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, first.Shutdown(context.Background()))

	up.Store(true)
	second := start()
	defer func() { require.NoError(t, second.Shutdown(context.Background())) }()
	require.Eventually(t, func() bool { return len(loki.received()) == 2 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "req-1715234890123-a1b2c3", metadataMap(loki.received()[1].req.Streams[0].Entries[0])[golden.ReqID])
}
