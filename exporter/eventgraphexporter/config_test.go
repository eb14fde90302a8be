package eventgraphexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/exporter/eventgraphexporter/internal/metadata"
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
	assert.Equal(t, createDefaultConfig(), cfg, "the default is the embedded store, valid as it is")

	cfg, err = loadConfig(t, "embedded")
	require.NoError(t, err)
	want := createDefaultConfig().(*Config)
	want.Embedded = EmbeddedConfig{
		Path:      "/var/lib/loom/graph.db",
		Retention: RetentionConfig{MaxAge: 72 * time.Hour, MaxBytes: 4 << 30, CheckInterval: 5 * time.Minute},
	}
	want.MaxPropertyBytes = 2048
	assert.Equal(t, want, cfg)

	cfg, err = loadConfig(t, "neo4j")
	require.NoError(t, err)
	want = createDefaultConfig().(*Config)
	want.Backend = BackendNeo4j
	want.TimeoutConfig.Timeout = 10 * time.Second
	want.Neo4j.URI = "neo4j+s://graph.example.com:7687"
	want.Neo4j.Username = "loom"
	want.Neo4j.Password = "s3cret"
	want.Neo4j.Database = "events"
	want.Neo4j.TLS.CAFile = "/etc/loom/neo4j-ca.pem"
	want.Neo4j.Batch = BatchConfig{MaxRows: 5000, MaxWait: 250 * time.Millisecond}
	storage := component.MustNewIDWithName("file_storage", "eventgraph")
	want.QueueConfig.Get().StorageID = &storage
	want.RetryConfig.MaxElapsedTime = 30 * time.Minute
	assert.Equal(t, want, cfg)
}

func TestREADMEExamplesAreValid(t *testing.T) {
	for _, name := range []string{"readme_embedded", "readme_neo4j"} {
		_, err := loadConfig(t, name)
		assert.NoError(t, err, name)
	}
}

func TestValidateNamesKeyAndFix(t *testing.T) {
	for name, wants := range map[string][]string{
		"bad_backend": {`backend: "postgres" is not supported; use "embedded" (a local file) or "neo4j"`},
		"bad_embedded": {
			`embedded::path: "graph.db?mode=memory"; set a file name without "?" or "#"`,
			"embedded::retention::max_age: -1h0m0s; use 0 (keep forever) or a positive duration",
			"embedded::retention::check_interval: 0s; set a positive interval when a bound is set",
			"max_property_bytes: 10 is out of range; use 64 to 8000",
			"timeout: 0s; set a positive duration",
		},
		"bad_neo4j": {
			`neo4j::uri: "http://neo4j:7474" is not a Bolt URI; set e.g. "bolt://127.0.0.1:7687"`,
			"neo4j::username: empty; set the database user",
			"neo4j::batch::max_rows: 0; use 1 to 100000 events per transaction",
			"neo4j::batch::max_wait: 2h0m0s; use 0 (write what is there) up to 1m0s",
		},
		"negative_size":        {"embedded::retention::max_bytes: -5; use 0 (no bound) or a size in bytes"},
		"plaintext_with_certs": {`neo4j::tls: certificates are set but neo4j::uri "bolt://neo4j:7687" is plaintext; use the bolt+s:// scheme`},
	} {
		_, err := loadConfig(t, name)
		require.Error(t, err, name)
		for _, want := range wants {
			assert.ErrorContains(t, err, want, name)
		}
	}
}
