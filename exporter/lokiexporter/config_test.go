package lokiexporter

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/exporter/lokiexporter/internal/metadata"
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
	want.ClientConfig.Endpoint = "http://loki:3100"
	assert.Equal(t, want, cfg)
	url, err := cfg.pushURL()
	require.NoError(t, err)
	assert.Equal(t, "http://loki:3100/loki/api/v1/push", url)

	cfg, err = loadConfig(t, "full")
	require.NoError(t, err)
	want = createDefaultConfig().(*Config)
	want.ClientConfig.Endpoint = "https://loki.example.com/loki/api/v1/push"
	want.ClientConfig.Timeout = 10 * time.Second
	want.ClientConfig.Compression = configcompression.TypeGzip
	want.ClientConfig.Headers = configopaque.MapList{{Name: "X-Source", Value: "loom"}}
	want.Encoding = EncodingJSON
	want.Labels = LabelsConfig{
		Attributes: []LabelAttribute{
			{Attribute: "model_ver"},
			{Attribute: "stage", Name: "stage_top", TopSegment: true},
			{Attribute: "k8s.namespace.name"},
		},
		MaxValuesPerLabel: 50,
		CardinalityWindow: 30 * time.Minute,
	}
	want.StructuredMetadata.Attributes = []string{"http.route"}
	want.Line = LineConfig{Format: LineFormatLogfmt, Attributes: []string{"error.type"}, MaxSize: 65536, OnTooLong: OnTooLongDrop}
	want.Tenant = tenant.Config{FromAttribute: "tenant_id", Default: "shared"}
	want.MaxConcurrentPushes = 8
	storage := component.MustNewIDWithName("file_storage", "loki")
	want.QueueConfig.Get().StorageID = &storage
	want.QueueConfig.Get().QueueSize = 5000
	want.RetryConfig.MaxElapsedTime = 10 * time.Minute
	assert.Equal(t, want, cfg)
	url, err = cfg.pushURL()
	require.NoError(t, err)
	assert.Equal(t, want.ClientConfig.Endpoint, url, "an endpoint with a path is used as it is")
}

func TestREADMEExamplesAreValid(t *testing.T) {
	for _, name := range []string{"readme", "readme_metadata"} {
		_, err := loadConfig(t, name)
		require.NoError(t, err, name)
	}
}

func TestValidateNamesKeyAndFix(t *testing.T) {
	for name, wants := range map[string][]string{
		"no_endpoint":  {`endpoint: "" is not an http(s) URL; set it to Loki's address`},
		"req_id_label": {`labels::attributes::0::attribute: "req_id" has a value per request`},
		"metadata_unpartitioned": {
			`tenant::from_metadata: "x scope orgid" is not a valid header name`,
			`tenant::from_metadata: "x scope orgid" must be in sending_queue::batch::partition::metadata_keys`,
		},
		"bad": {
			`endpoint: "loki:3100" is not an http(s) URL`,
			`encoding: "xml" is not supported`,
			`labels::attributes::0::name: label "stage" would shadow the structured metadata entry`,
			`labels::attributes::1::name: "9lives" is not a Loki label name`,
			`labels::attributes::2::name: label "service_name" is already used`,
			`labels::max_values_per_label: must be positive`,
			`line::format: "yaml" is not supported`,
			`line::max_size: 10 is below 1024 bytes`,
			`line::on_too_long: "wrap" is not supported`,
			`max_concurrent_pushes: must be positive`,
			`tenant::default: "a/b" is not a valid tenant id`,
		},
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

func TestValidateLimits(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.ClientConfig.Endpoint = "http://loki:3100"
	for i := range maxLabelNames {
		cfg.Labels.Attributes = append(cfg.Labels.Attributes, LabelAttribute{Attribute: "a" + strings.Repeat("x", i)})
	}
	cfg.ClientConfig.Compression = configcompression.TypeGzip
	cfg.StructuredMetadata.Attributes = []string{"input_hash"}
	cfg.Line.Attributes = []string{"body"}
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{
		"labels::attributes: 16 labels with level exceed Loki's limit of 15",
		"compression: protobuf pushes are already snappy-compressed",
		`structured_metadata::attributes: "input_hash" is empty or a golden field`,
		`line::attributes: "body" is the key of the record body`,
	} {
		assert.Contains(t, err.Error(), want)
	}
}
