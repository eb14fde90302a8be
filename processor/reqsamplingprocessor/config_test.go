package reqsamplingprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
)

func loadConfig(t testing.TB, name string) *Config {
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
	def := defaultConfig()
	assert.Equal(t, def, loadConfig(t, ""))
	require.NoError(t, confmap.Validate(def))

	gateway := defaultConfig()
	gateway.Policies[1].Latency = LatencyConfig{Threshold: 2 * time.Second}
	got := loadConfig(t, "gateway")
	assert.Equal(t, gateway, got)
	require.NoError(t, confmap.Validate(got))

	requests := component.MustNewIDWithName("file_storage", "requests")
	everything := &Config{
		DecisionWait:   10 * time.Second,
		MaxRequests:    100_000,
		MaxBytes:       512 << 20,
		DecisionCache:  DecisionCacheConfig{TTL: 10 * time.Minute, MaxEntries: 500_000},
		BasePercentage: 0.5,
		HashSeed:       42,
		Policies: []PolicyConfig{
			{Name: "errors", Type: Errors, Errors: ErrorsConfig{MinSeverity: "warn"}},
			{Name: "known_bad_inputs", Type: InputHash, InputHash: InputHashConfig{Ranges: []string{"00-09", "f7"}}},
			{Name: "slow", Type: Latency, Latency: LatencyConfig{Quantile: 0.999, MinSamples: 500, HalfLife: 30 * time.Minute, MaxSeries: 200}},
			{Name: "invalid", Type: GoldenInvalid, Percentage: 10},
		},
		Learning:       LearningConfig{HalfLife: 30 * time.Minute, MinFailures: 5, MinFailureRate: 0.5, PrefixLength: 3, MaxHashes: 200_000},
		VolumeGuard:    VolumeGuardConfig{MaxShare: 0.1},
		Storage:        &requests,
		NumShards:      4,
		CompactWaiting: false,
		Share:          defaultConfig().Share,
		Handover:       defaultConfig().Handover,
	}
	everything.Share.Server.NetAddr.Endpoint = "0.0.0.0:4319"
	everything.Share.Client.Timeout = 2 * time.Second
	everything.Share.Peers = []string{"http://loom-gateway-1:4319"}
	everything.Share.DNS = "http://loom-gateway-headless:4319"
	everything.Share.Interval = 2 * time.Second
	everything.Share.MaxBytes = 512 << 10
	everything.Handover.Self = "10.0.0.7:4317"
	everything.Handover.Resolver.K8s = K8sResolverConfig{Service: "loom-gateway-headless.observability", Ports: []int32{4317}}
	everything.Handover.Client.Compression = "zstd"
	everything.Handover.Timeout = 2 * time.Second
	got = loadConfig(t, "everything")
	assert.Equal(t, everything, got)
	require.NoError(t, confmap.Validate(got))
}

func TestValidateNamesTheKeyToFix(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "invalid"))
	require.Error(t, err)
	for _, key := range []string{
		"num_shards:", "decision_wait:", "max_requests:", "max_bytes:", "decision_cache::max_entries:", "base_percentage:",
		"learning::half_life:", "learning::min_failures:", "learning::min_failure_rate:", "learning::prefix_length:",
		"learning::max_hashes:",
		`policies::0::name: "base_rate"`, "policies::0::errors::min_severity:",
		"policies::1::failure_condition::conditions::0:",
		`policies::2::name: "twice"`, "policies::2::percentage:", "policies::2::latency::factor:",
		"policies::3::input_hash::ranges::0:", "policies::4::stage::patterns",
		`policies::5::type: "sometimes"`,
		"policies::6::errors::attributes: an empty list checks no attribute",
		"share::interval:", "share::max_bytes:", "share::client::endpoint:", `share::peers::0: must be an http(s) URL`,
		`share::peers::1: must be an http(s) URL`, "share::dns:",
		`handover::self: must be host:port`, "handover::resolver: must name exactly one", "handover::resolver::static::members::1:",
		"handover::resolver::static::members::2: an IPv6 address must be in brackets, as the agents list it: [fd00::7]:4317",
		"handover::resolver::k8s::service:", "handover::resolver::k8s::ports::0:", "handover::client::endpoint:", "handover::timeout:",
		"volume_guard::max_share:", "policies::7::value_drift::rare_share:", "; value_drift::baseline_records, value_drift::recent_records:",
	} {
		assert.ErrorContains(t, err, key)
	}
}

func TestSelfIsNamedAsTheResolversNameMembers(t *testing.T) {
	for self, want := range map[string]string{
		"10.0.0.7:4317":       "10.0.0.7:4317",
		"loom-gateway-0:4317": "loom-gateway-0:4317",
		"fd00::7:4317":        "[fd00::7]:4317", // $(POD_IP):4317 on an IPv6 cluster
		"[fd00::7]:4317":      "[fd00::7]:4317",
	} {
		c := HandoverConfig{Self: self, Resolver: HandoverResolverConfig{Static: StaticResolverConfig{Members: []string{want}}}, Timeout: time.Second}
		assert.Equal(t, want, c.self(), self)
		var errs []string
		c.validate(func(ok bool, key, format string, args ...any) {
			if !ok {
				errs = append(errs, key)
			}
		})
		assert.Empty(t, errs, self)
	}
}

func TestAResolverNeedsSelf(t *testing.T) {
	assert.ErrorContains(t, confmap.Validate(loadConfig(t, "resolver_without_self")), "handover::self: must be set when a resolver is")
}

func TestTooManyPolicies(t *testing.T) {
	cfg := defaultConfig()
	for i := range maxPolicies {
		cfg.Policies = append(cfg.Policies, PolicyConfig{Name: "p" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Type: GoldenInvalid})
	}
	assert.ErrorContains(t, cfg.Validate(), "policies: at most 64")
}
