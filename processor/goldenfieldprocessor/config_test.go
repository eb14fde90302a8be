package goldenfieldprocessor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := defaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestLoadConfig(t *testing.T) {
	assert.Equal(t, defaultConfig(), loadConfig(t, ""))
	require.NoError(t, confmap.Validate(defaultConfig()))

	want := defaultConfig()
	want.Extract = ExtractConfig{
		Enabled: true, MaxBodyBytes: 16384, MaxDepth: 4, MaxFields: 32,
		TextKeys: []string{"stage", "latency_ms"},
		Patterns: []string{`\b(?P<req_id>req[-_][a-z_-]*[0-9][0-9A-Za-z_-]*)`, `tenant=(?P<tenant>[a-z]+)`},
	}
	want.Normalize = NormalizeConfig{
		Aliases:       map[string]string{"trace_req": "req_id", "model": ""},
		Models:        map[string]string{"qwen": "qwen2-7b-chat"},
		NumericFields: []string{golden.InputTokens},
		MaxValueBytes: 1024,
	}
	want.InputHash = InputHashConfig{SourceFields: []string{"prompt", "messages"}, Normalization: golden.NormalizeLowercase}
	want.Redaction = RedactionConfig{
		Enabled: true, Mode: RedactionMask, Attributes: []string{"api_key"},
		BodyPatterns: []string{"email"}, CustomPatterns: []string{`acct-\d+`},
	}
	want.Validation = ValidationConfig{
		PerService:   true,
		Profile:      ProfileFull,
		Required:     []string{"tenant"},
		ReqIDFormats: []string{"req-celery-{uuid}", "req_{ts}_{hex}"},
		Patterns:     map[string]string{"model_ver": `-v\d+\.\d+\.\d+$`},
		Rules: []RuleConfig{{
			Name:      "forward_has_latency",
			Condition: `attributes["stage"] == "model/forward" and attributes["resource_usage.latency_ms"] == nil`,
		}},
	}
	want.Action = ActionConfig{Mode: ActionDrop, DropReasons: []string{"missing:req_id", "rule"}}
	want.Drift = DriftConfig{Enabled: true, MaxSeries: 500, MaxFields: 64, MinRecords: 30, PresentRate: 0.9, AbsentRate: 0.1}
	want.MaxServices = 32

	got := loadConfig(t, "custom")
	assert.Equal(t, want, got)
	require.NoError(t, confmap.Validate(got))
}

// Every error names the key to fix.
func TestValidateNamesTheKey(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "bad"))
	require.Error(t, err)
	for _, key := range []string{
		"extract::max_depth",
		"extract::patterns",
		"normalize::aliases::rid",
		"input_hash::normalization",
		"redaction::mode",
		"redaction::body_patterns::0",
		"validation::profile",
		"validation::req_id_formats",
		"validation::patterns::stage",
		"validation::rules::0.condition",
		"action::mode",
		"drift::absent_rate, drift::present_rate",
	} {
		assert.Contains(t, err.Error(), key)
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"pattern without a named group", func(c *Config) { c.Extract.Patterns = []string{`req-\d+`} }, "extract::patterns: pattern"},
		{"empty text key", func(c *Config) { c.Extract.TextKeys = []string{""} }, "extract::text_keys"},
		{"numeric alias", func(c *Config) { c.Normalize.NumericFields = []string{"duration_ms"} }, `normalize::numeric_fields: "duration_ms" is an alias`},
		{"raw input that is an alias", func(c *Config) { c.InputHash.SourceFields = []string{"request_id"} }, "input_hash::source_fields::0"},
		{"empty model", func(c *Config) { c.Normalize.Models = map[string]string{"qwen": ""} }, "normalize::models::qwen"},
		{"custom pattern", func(c *Config) { c.Redaction.CustomPatterns = []string{"("} }, "redaction::custom_patterns::0"},
		{"rule without name", func(c *Config) { c.Validation.Rules = []RuleConfig{{Condition: "true"}} }, "validation::rules::0.name"},
		{"rule without condition", func(c *Config) { c.Validation.Rules = []RuleConfig{{Name: "x"}} }, "validation::rules::0.condition: empty"},
		{"duplicate rules", func(c *Config) {
			c.Validation.Rules = []RuleConfig{{Name: "x", Condition: "true"}, {Name: "x", Condition: "true"}}
		}, "validation::rules::1.name"},
		{"drop reason", func(c *Config) { c.Action = ActionConfig{Mode: ActionDrop, DropReasons: []string{"late"}} }, "action::drop_reasons::0"},
		{"drop reason without field", func(c *Config) { c.Action = ActionConfig{Mode: ActionDrop, DropReasons: []string{"missing:"}} }, "action::drop_reasons::0"},
		{"drop reasons in tag mode", func(c *Config) { c.Action.DropReasons = []string{"missing"} }, "action::drop_reasons: only applies"},
		{"required empty", func(c *Config) { c.Validation.Required = []string{""} }, "validation::required::0"},
		{"max_series", func(c *Config) { c.Drift.MaxSeries = 1 }, "drift::max_series"},
		{"max_value_bytes", func(c *Config) { c.Normalize.MaxValueBytes = 0 }, "normalize::max_value_bytes"},
		{"max_services", func(c *Config) { c.MaxServices = 0 }, "max_services"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultConfig()
			tt.mod(cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
