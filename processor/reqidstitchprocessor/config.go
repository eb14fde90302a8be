package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
)

// Config is the reqidstitch processor's configuration.
type Config struct {
	// MaxRequests bounds the binding index; at capacity the least recently seen of a sample is evicted.
	MaxRequests int `mapstructure:"max_requests"`
	// TTL is how long a request stays tracked after its last record.
	TTL time.Duration `mapstructure:"ttl"`
	// Hold is the late-binding wait of records whose ids the index does not know yet.
	Hold HoldConfig `mapstructure:"hold"`
	// KeyByTrace keys a request that carries no req_id by its trace: a record
	// with trace context that no record carrying a req_id binds gets its
	// trace's key (golden.TraceKey) as req_id, marked golden.req_id_from.
	// Off, such records leave the hold as they came.
	KeyByTrace bool `mapstructure:"key_by_trace"`
	// LinkDetached links spans of detached work to their request's primary root.
	// Agents that see only part of a request turn it off and leave it to the gateways.
	LinkDetached bool `mapstructure:"link_detached"`
	// GPUAttribution gives GPU events the req_id of the span that covers them.
	GPUAttribution GPUAttributionConfig `mapstructure:"gpu_attribution"`
	// Rules are the causal rules; setting the list replaces the default rules.
	Rules []RuleConfig `mapstructure:"rules"`
	// MaxRuleKeys bounds each rule's remembered causes (one per join key value).
	MaxRuleKeys int `mapstructure:"max_rule_keys"`
	// TrustUpstreamIdentity keeps the event.id, causal edges and stitch marks
	// that records arrive with. Only a gateway whose clients are Loom agents
	// (authenticated) may turn it on: a client that sets them could rewrite
	// another request's event in the graph or add edges to it.
	TrustUpstreamIdentity bool `mapstructure:"trust_upstream_identity"`
	// Storage names a storage extension (file_storage) that keeps held
	// records until they are passed on, so that a crash loses none; without
	// it they live in memory only.
	Storage *component.ID `mapstructure:"storage"`

	// options are test seams (clock, ticks), never set from YAML.
	options []option `mapstructure:"-"`
	_       struct{}
}

// HoldConfig bounds the late-binding hold.
type HoldConfig struct {
	// Duration is the longest a record waits for a binding; 0 disables the hold.
	Duration time.Duration `mapstructure:"duration"`
	// MaxRecords and MaxBytes bound what is held; the oldest record leaves first.
	MaxRecords int `mapstructure:"max_records"`
	MaxBytes   int `mapstructure:"max_bytes"`
	_          struct{}
}

// GPUAttributionConfig configures the attribution of GPU events to requests.
type GPUAttributionConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Condition is the OTTL log condition that selects GPU events.
	Condition string `mapstructure:"condition"`
	// Wait is how long a GPU event waits for the span that covers it, and how
	// long a span waits for its GPU events: at least the SDKs' batch delay
	// (OTEL_BSP_SCHEDULE_DELAY, 5s by default) plus a span's duration.
	Wait time.Duration `mapstructure:"wait"`
	// MaxProcesses bounds the (host, pid) table; SpansPerProcess bounds the
	// spans of one wait each process remembers.
	MaxProcesses    int `mapstructure:"max_processes"`
	SpansPerProcess int `mapstructure:"spans_per_process"`
	_               struct{}
}

// RuleConfig is one causal rule: when a record matching To follows a record
// matching From with the same join key values within Window, To gets a
// causal.parents entry "{event.id of From}:{EdgeType}".
type RuleConfig struct {
	Name string `mapstructure:"name"`
	// From and To are OTTL conditions, evaluated on log records and spans; paths
	// that exist in one context only (body, name) make the condition apply to that signal only.
	From string `mapstructure:"from"`
	To   string `mapstructure:"to"`
	// JoinKeys are attribute names looked up on the record, then on its resource.
	// Rules keyed by host or GPU can run on node agents; rules keyed by req_id need
	// every record of a request, so they run on gateways.
	JoinKeys []string      `mapstructure:"join_keys"`
	Window   time.Duration `mapstructure:"window"`
	EdgeType string        `mapstructure:"edge_type"`
	_        struct{}
}

var _ confmap.Validator = (*Config)(nil)

// Rule names become metric attribute values and edge types graph labels: keep them plain.
var (
	ruleNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	edgeTypeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,62}$`)
)

// parseOnly is the telemetry of conditions parsed to validate them, never evaluated.
var parseOnly = component.TelemetrySettings{Logger: zap.NewNop()}

// maxWindow bounds rule windows: state is remembered for at most this long anyway.
const maxWindow = time.Hour

// Validate checks the configuration, naming the YAML key and the fix.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxRequests < 1 {
		errs = append(errs, fmt.Errorf("max_requests: %d; want at least 1 (default 100000)", c.MaxRequests))
	}
	if c.TTL <= 0 {
		errs = append(errs, fmt.Errorf("ttl: %v; want a positive duration that outlives a request's slowest async work (default 5m)", c.TTL))
	}
	if c.Hold.Duration < 0 {
		errs = append(errs, fmt.Errorf("hold::duration: %v; want 0 (no hold) or a short positive duration such as 2s", c.Hold.Duration))
	}
	if c.Hold.Duration > 0 && (c.Hold.MaxRecords < 1 || c.Hold.MaxBytes < 1) {
		errs = append(errs, fmt.Errorf("hold::max_records (%d) and hold::max_bytes (%d): want both positive when hold::duration is set", c.Hold.MaxRecords, c.Hold.MaxBytes))
	}
	if c.GPUAttribution.Enabled {
		if c.GPUAttribution.Wait <= 0 {
			errs = append(errs, fmt.Errorf("gpu_attribution::wait (%v): want a positive duration, e.g. 10s, or set gpu_attribution::enabled: false", c.GPUAttribution.Wait))
		}
		if c.GPUAttribution.MaxProcesses < 1 || c.GPUAttribution.SpansPerProcess < 1 {
			errs = append(errs, fmt.Errorf("gpu_attribution::max_processes (%d) and gpu_attribution::spans_per_process (%d): want both positive, or set gpu_attribution::enabled: false",
				c.GPUAttribution.MaxProcesses, c.GPUAttribution.SpansPerProcess))
		}
		if _, err := newLogCondition(c.GPUAttribution.Condition, parseOnly); err != nil {
			errs = append(errs, fmt.Errorf("gpu_attribution::condition: %w", err))
		}
	}
	if len(c.Rules) > 0 && c.MaxRuleKeys < 1 {
		errs = append(errs, fmt.Errorf("max_rule_keys: %d; want at least 1 when rules are set (default 10000)", c.MaxRuleKeys))
	}
	names := map[string]bool{}
	for i, r := range c.Rules {
		errs = append(errs, r.validate(fmt.Sprintf("rules::%d::", i))...)
		if names[r.Name] {
			errs = append(errs, fmt.Errorf("rules::%d::name: %q is used twice; give every rule its own name", i, r.Name))
		}
		names[r.Name] = true
	}
	return errors.Join(errs...)
}

// validate returns the rule's problems, each prefixed with the rule's YAML path.
func (r RuleConfig) validate(path string) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(path+format, args...))
	}
	if !ruleNameRE.MatchString(r.Name) {
		fail("name: %q; want lowercase letters, digits and _, starting with a letter, e.g. cache_miss_trigger_inference", r.Name)
	}
	if !edgeTypeRE.MatchString(r.EdgeType) {
		fail("edge_type: %q; want letters, digits and _, starting with a letter, e.g. triggered", r.EdgeType)
	}
	if len(r.JoinKeys) == 0 {
		fail("join_keys: empty; name the attributes that must match, e.g. [req_id] or [host.name, gpu.id]")
	}
	for j, k := range r.JoinKeys {
		if k == "" {
			fail("join_keys::%d: empty attribute name", j)
		}
	}
	if r.Window <= 0 || r.Window > maxWindow {
		fail("window: %v; want a positive duration up to %v, e.g. 500ms", r.Window, maxWindow)
	}
	if _, err := newCondition(r.From, parseOnly); err != nil {
		fail("from: %w", err)
	}
	if _, err := newCondition(r.To, parseOnly); err != nil {
		fail("to: %w", err)
	}
	return errs
}
