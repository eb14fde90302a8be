package rcaextension

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/extension/rcaextension/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestLoadConfig(t *testing.T) {
	def := loadConfig(t, "")
	require.NoError(t, confmap.Validate(def))
	assert.Equal(t, "127.0.0.1:4320", def.Server.NetAddr.Endpoint, "loopback by default")
	assert.Equal(t, component.MustNewID("eventgraph"), def.Graph)
	assert.Equal(t, 15*time.Minute, def.Window)

	custom := loadConfig(t, "custom")
	require.NoError(t, confmap.Validate(custom))
	assert.Equal(t, "127.0.0.1:14320", custom.Server.NetAddr.Endpoint)
	assert.Equal(t, component.MustNewIDWithName("eventgraph", "neo4j"), custom.Graph)
	assert.Equal(t, component.MustNewIDWithName("reqsampling", "gateway"), custom.Sampler)
	assert.Equal(t, time.Hour, custom.Window)
	assert.Equal(t, 48*time.Hour, custom.MaxWindow)
	assert.Equal(t, 50, custom.MaxRequests)

	err := confmap.Validate(loadConfig(t, "bad"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "window: must be positive")
	assert.Contains(t, err.Error(), "max_requests: must be positive")
}
