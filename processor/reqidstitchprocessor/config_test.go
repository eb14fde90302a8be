package reqidstitchprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/processor/reqidstitchprocessor/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestLoadConfig(t *testing.T) {
	def := createDefaultConfig().(*Config)
	assert.Equal(t, def, loadConfig(t, ""))
	require.NoError(t, confmap.Validate(def))

	agent := createDefaultConfig().(*Config)
	agent.MaxRequests = 20000
	agent.TTL = 2 * time.Minute
	agent.Hold = HoldConfig{Duration: time.Second, MaxRecords: 5000, MaxBytes: 8 << 20}
	agent.LinkDetached = false
	agent.GPUAttribution = GPUAttributionConfig{
		Enabled: true, Condition: `resource.attributes["service.name"] == "gpu-receiver"`,
		Wait: 8 * time.Second, MaxProcesses: 256, SpansPerProcess: 64,
	}
	agent.MaxRuleKeys = 1000
	agent.Rules = []RuleConfig{{
		Name:     "gpu_oom_cause_timeout",
		From:     `attributes["hw.gpu.memory.usage"] >= 0.95 * attributes["hw.gpu.memory.limit"]`,
		To:       `attributes["resource_usage.latency_ms"] > 3000`,
		JoinKeys: []string{"host.name", "gpu.id"},
		Window:   5 * time.Second,
		EdgeType: "caused_timeout",
	}}
	got := loadConfig(t, "agent")
	assert.Equal(t, agent, got)
	require.NoError(t, confmap.Validate(got))

	gateway := loadConfig(t, "gateway")
	assert.False(t, gateway.GPUAttribution.Enabled)
	assert.Empty(t, gateway.Rules, "rules: [] replaces the default rules")
	assert.Equal(t, component.MustNewIDWithName("file_storage", "requests"), *gateway.Storage)
	require.NoError(t, confmap.Validate(gateway))
}

func TestValidateNamesKeyAndFix(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "invalid"))
	require.Error(t, err)
	for _, want := range []string{
		"max_requests: 0; want at least 1",
		"ttl: 0s; want a positive duration",
		"hold::max_records (0) and hold::max_bytes",
		"gpu_attribution::condition:",
		`rules::0::name: "Bad Name"`,
		"rules::0::edge_type:",
		"rules::0::join_keys::0: empty attribute name",
		"rules::0::window: 0s; want a positive duration",
		"rules::0::to: \"nonsense(\" is neither a log condition",
		`rules::2::name: "dup" is used twice`,
	} {
		assert.ErrorContains(t, err, want)
	}
	// body exists for logs only: the condition applies to log records, and is valid.
	assert.NotContains(t, err.Error(), "rules::0::from:")
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		change func(*Config)
		want   string
	}{
		"hold off needs no bounds": {change: func(c *Config) { c.Hold = HoldConfig{} }},
		"negative hold":            {change: func(c *Config) { c.Hold.Duration = -time.Second }, want: "hold::duration"},
		"gpu off needs no bounds": {change: func(c *Config) {
			c.GPUAttribution = GPUAttributionConfig{Enabled: false}
		}},
		"gpu bounds": {change: func(c *Config) { c.GPUAttribution.SpansPerProcess = 0 }, want: "gpu_attribution::spans_per_process (0)"},
		"gpu wait":   {change: func(c *Config) { c.GPUAttribution.Wait = 0 }, want: "gpu_attribution::wait (0s): want a positive duration"},
		"rule keys":  {change: func(c *Config) { c.MaxRuleKeys = 0 }, want: "max_rule_keys: 0"},
		"no rules need no keys": {change: func(c *Config) {
			c.Rules, c.MaxRuleKeys = nil, 0
		}},
		"window too long": {change: func(c *Config) { c.Rules[0].Window = 2 * time.Hour }, want: "rules::0::window: 2h0m0s"},
		"no join keys":    {change: func(c *Config) { c.Rules[1].JoinKeys = nil }, want: "rules::1::join_keys: empty"},
		"span-only rule":  {change: func(c *Config) { c.Rules[0].From = `name == "cache/miss"` }},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tt.change(cfg)
			err := cfg.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}
