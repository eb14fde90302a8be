package tempoexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/exporter/tempoexporter/internal/metadata"
	"github.com/loom-otel/loom/internal/tenant"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.MustNewIDWithName(metadata.Type.String(), name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg, confmap.Validate(cfg)
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(t, "")
	require.NoError(t, err)
	want := createDefaultConfig().(*Config)
	want.ClientConfig.Endpoint = "tempo:4317"
	assert.Equal(t, want, cfg)
	assert.False(t, cfg.HTTP.HasValue(), "gRPC unless http is set")

	cfg, err = loadConfig(t, "http")
	require.NoError(t, err)
	require.True(t, cfg.HTTP.HasValue())
	assert.Equal(t, "http://tempo:4318", cfg.HTTP.Get().Endpoint)
	assert.Equal(t, 5*time.Second, cfg.HTTP.Get().Timeout)
	assert.Equal(t, configcompression.TypeGzip, cfg.HTTP.Get().Compression, "otlphttp defaults apply under http")
	assert.Equal(t, TenantConfig{Config: tenant.Config{FromAttribute: "tenant_id", Default: "shared"}, MaxClients: 10}, cfg.Tenant)
	assert.Equal(t, component.MustNewIDWithName("file_storage", "tempo"), *cfg.QueueConfig.Get().StorageID)
	assert.Equal(t, 10*time.Minute, cfg.RetryConfig.MaxElapsedTime)
}

func TestREADMEExamplesAreValid(t *testing.T) {
	for _, name := range []string{"readme", "readme_http", "readme_metadata"} {
		_, err := loadConfig(t, name)
		require.NoError(t, err, name)
	}
}

func TestValidateNamesKeyAndFix(t *testing.T) {
	for name, wants := range map[string][]string{
		"none":                   {`endpoint: set Tempo's OTLP/gRPC address`},
		"both":                   {`endpoint and http: set only one`},
		"bad_tenant":             {`tenant::max_clients: must be positive`, `tenant::default: "../x" is not a valid tenant id`},
		"metadata_unpartitioned": {`tenant::from_metadata: "x-scope-orgid" must be in sending_queue::batch::partition::metadata_keys`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.Error(t, err)
			for _, want := range wants {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}
