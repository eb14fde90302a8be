package rcaextension

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/loom-otel/loom/extension/rcaextension/internal/metadata"
)

// The extension serves on its endpoint while it runs, and says so when no
// eventgraph exporter is running beside it.
func TestServesWhileRunning(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Server.NetAddr.Endpoint = "127.0.0.1:0"
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	url := pageURL(ext.(*rcaExtension).addr, false)

	resp, err := http.Get(url + "api/failing")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(body), "no eventgraph exporter")

	require.NoError(t, ext.Shutdown(context.Background()))
	if resp, err = http.Get(url); err == nil {
		resp.Body.Close()
	}
	assert.Error(t, err, "nothing listens after shutdown")
}
