package reqsamplingprocessor // import "github.com/loom-otel/loom/processor/reqsamplingprocessor"

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/confmap"
)

// Config is the reqsampling processor's configuration.
type Config struct {
	// DecisionWait is how long a request's records are buffered after its
	// first record arrived before the request is decided.
	DecisionWait time.Duration `mapstructure:"decision_wait"`
	// MaxRequests bounds the requests waiting for a decision; beyond it the
	// oldest are decided early.
	MaxRequests int `mapstructure:"max_requests"`
	// MaxBytes bounds the estimated size of the buffered records; beyond it
	// the oldest requests are decided early.
	MaxBytes int `mapstructure:"max_bytes"`
	// DecisionCache remembers decisions, so that records arriving after
	// their request was decided share its fate.
	DecisionCache DecisionCacheConfig `mapstructure:"decision_cache"`
	// BasePercentage is the share of requests kept when no policy matches,
	// chosen by a hash of req_id: the same on every collector instance.
	BasePercentage float64 `mapstructure:"base_percentage"`
	// HashSeed seeds that hash; instances that must agree share it.
	HashSeed uint64 `mapstructure:"hash_seed"`
	// Policies are tried in order; a request is kept with the highest
	// percentage among the policies it matches, credited to the first of them.
	Policies []PolicyConfig `mapstructure:"policies"`
	// Learning configures how hot inputs are learned from failures.
	Learning LearningConfig `mapstructure:"learning"`
	// VolumeGuard bounds what the policies that do not report failures keep.
	VolumeGuard VolumeGuardConfig `mapstructure:"volume_guard"`
	// Storage names a storage extension (file_storage) that keeps the
	// records waiting for a decision until they are passed on, so that a
	// crash loses none; without it they live in memory only.
	Storage *component.ID `mapstructure:"storage"`
	// CompactWaiting keeps the records waiting for a decision encoded, as
	// they travel on the wire, and decodes them again only if some are kept.
	CompactWaiting bool `mapstructure:"compact_waiting"`
	// NumShards splits the requests waiting for a decision between this
	// many goroutines, by a hash of their key, each with its share of
	// max_requests, max_bytes and decision_cache::max_entries.
	NumShards int `mapstructure:"num_shards"`
	// Share exchanges what the failure model learns with the other
	// gateways, so that each learns from all the traffic, not only from the
	// requests routed to it.
	Share ShareConfig `mapstructure:"share"`
	// Handover keeps every request on the one gateway that owns it when the
	// set of gateways changes: records of requests another gateway owns
	// are forwarded to it, and so are the waiting requests whose owner changed.
	Handover HandoverConfig `mapstructure:"handover"`

	// options are test seams (clock, ticks), never set from YAML.
	options []option `mapstructure:"-"`

	_ struct{}
}

// DecisionCacheConfig bounds the memory of past decisions.
type DecisionCacheConfig struct {
	// TTL is how long a decision is remembered.
	TTL time.Duration `mapstructure:"ttl"`
	// MaxEntries bounds the decisions remembered; the oldest is forgotten first.
	MaxEntries int `mapstructure:"max_entries"`

	_ struct{}
}

// PolicyType names a kind of policy.
type PolicyType string

const (
	// Errors keeps requests with a span with status error, a log record at
	// or above min_severity, or a record carrying an error attribute.
	Errors PolicyType = "errors"
	// FailureCondition keeps requests with a record for which an OTTL
	// condition holds: failures no record reports as an error.
	FailureCondition PolicyType = "failure_condition"
	// Latency keeps requests slower than a threshold or a live quantile.
	Latency PolicyType = "latency"
	// Stage keeps requests with a record whose stage matches a glob.
	Stage PolicyType = "stage"
	// InputHash keeps requests whose input_hash starts with a configured prefix.
	InputHash PolicyType = "input_hash"
	// HotInput keeps requests whose input_hash the learner holds hot.
	HotInput PolicyType = "hot_input"
	// GoldenInvalid keeps requests with a record that failed golden-field validation.
	GoldenInvalid PolicyType = "golden_invalid"
	// ValueDrift keeps requests with an outcome attribute whose value is rare
	// in its place's baseline and surging now: silent failures.
	ValueDrift PolicyType = "value_drift"
)

// failure reports whether a match of this policy type means the request
// failed: the failure model's detectors (internal/failure), what the
// verdict on the records and the learner go by.
func (t PolicyType) failure() bool {
	return t == Errors || t == FailureCondition || t == Latency || t == ValueDrift
}

// PolicyConfig is one policy; only the block named by Type is read.
type PolicyConfig struct {
	// Name identifies the policy in sampling.policy and in telemetry.
	Name string     `mapstructure:"name"`
	Type PolicyType `mapstructure:"type"`
	// Percentage of the matching requests kept, chosen by the req_id hash;
	// 0 (unset) means 100.
	Percentage float64 `mapstructure:"percentage"`

	Errors           ErrorsConfig           `mapstructure:"errors"`
	FailureCondition FailureConditionConfig `mapstructure:"failure_condition"`
	Latency          LatencyConfig          `mapstructure:"latency"`
	Stage            StageConfig            `mapstructure:"stage"`
	InputHash        InputHashConfig        `mapstructure:"input_hash"`
	ValueDrift       ValueDriftConfig       `mapstructure:"value_drift"`

	_ struct{}
}

// ErrorsConfig configures an errors policy.
type ErrorsConfig struct {
	// MinSeverity is the lowest log severity that reports an error: trace,
	// debug, info, warn, error or fatal; unset means error.
	MinSeverity string `mapstructure:"min_severity"`
	// Attributes report an error when present with a non-empty, non-zero value.
	Attributes []string `mapstructure:"attributes"`
	// SemanticConventions reads the status codes, exception events and
	// finish reasons that the OpenTelemetry semantic conventions define as
	// failures; unset means true.
	SemanticConventions *bool `mapstructure:"semantic_conventions"`
	// FailureFinishReasons are the gen_ai.response.finish_reasons values that
	// report a failure; unset means [error].
	FailureFinishReasons []string `mapstructure:"failure_finish_reasons"`

	_ struct{}
}

// FailureConditionConfig configures a failure_condition policy.
type FailureConditionConfig struct {
	// Conditions are OTTL conditions, true on a failing log record or span;
	// each applies to the signals whose OTTL context parses it.
	Conditions []string `mapstructure:"conditions"`

	_ struct{}
}

// LatencyConfig configures a latency policy: every span (and every log record
// stating resource_usage.latency_ms) is compared with its place, the same
// service, stage and model_ver, learned online.
type LatencyConfig struct {
	// Threshold keeps every request whose entry span (the earliest root span)
	// is slower than it (0: off): an SLO.
	Threshold time.Duration `mapstructure:"threshold"`
	// Quantile is the live quantile that bounds a place's usual time; unset means 0.995.
	Quantile float64 `mapstructure:"quantile"`
	// Factor: a record slower than factor × that quantile is abnormal; unset means 2.
	Factor float64 `mapstructure:"factor"`
	// MinExcess: nor is it abnormal unless it exceeds the quantile by this
	// much; unset means 5ms.
	MinExcess time.Duration `mapstructure:"min_excess"`
	// MinSamples is how many recent records a place needs before it is
	// judged; unset means 100.
	MinSamples int `mapstructure:"min_samples"`
	// HalfLife is how fast a place forgets old durations; unset means 10m.
	HalfLife time.Duration `mapstructure:"half_life"`
	// MaxSeries bounds the places tracked; unset means 1000.
	MaxSeries int `mapstructure:"max_series"`

	_ struct{}
}

// ValueDriftConfig configures a value_drift policy (internal/failure's Drift);
// unset keys take the defaults in brackets.
type ValueDriftConfig struct {
	// RareShare: a value under this share of its place's baseline is rare [0.05].
	RareShare float64 `mapstructure:"rare_share"`
	// SurgeRatio: a rare value surges when its recent share is this many times its baseline share [4].
	SurgeRatio float64 `mapstructure:"surge_ratio"`
	// MinCount: recent records (decayed) that must carry a surging value [4].
	MinCount float64 `mapstructure:"min_count"`
	// BaselineRecords and RecentRecords: half-lives of the baseline and of
	// the recent window, in records of the place [20000, 400].
	BaselineRecords float64 `mapstructure:"baseline_records"`
	RecentRecords   float64 `mapstructure:"recent_records"`
	// MinBaseline: records a place needs before its values are judged [48].
	MinBaseline float64 `mapstructure:"min_baseline"`
	// MaxPlaces [2000], MaxAttributes per place [64], MaxValues per attribute
	// [24]: an attribute with more values is not an outcome.
	MaxPlaces     int `mapstructure:"max_places"`
	MaxAttributes int `mapstructure:"max_attributes"`
	MaxValues     int `mapstructure:"max_values"`

	_ struct{}
}

// StageConfig configures a stage policy.
type StageConfig struct {
	// Patterns are globs on the stage attribute: * matches any run of
	// characters ('/' included), ? one character.
	Patterns []string `mapstructure:"patterns"`

	_ struct{}
}

// InputHashConfig configures an input_hash policy.
type InputHashConfig struct {
	// Ranges are input_hash prefixes ("f7") or inclusive ranges of prefixes
	// of one length ("00-09"), in lowercase hex.
	Ranges []string `mapstructure:"ranges"`

	_ struct{}
}

// VolumeGuardConfig bounds the share of requests that the policies which do
// not report failures (stage, input_hash, hot_input, golden_invalid) keep
// beyond the base rate: a rule that matches a common, healthy event must not
// keep a third of the traffic. Failures are never throttled.
type VolumeGuardConfig struct {
	// MaxShare is that share of the recent requests (about the last 1000
	// decided); above it, such a policy's matches are decided at the base
	// rate instead, and counted. 0 turns the guard off.
	MaxShare float64 `mapstructure:"max_share"`

	_ struct{}
}

// ShareConfig configures sharing learned state between gateways: value
// drift's baselines and recent windows, and the hot-input learner's counts. Off unless a server
// endpoint, peers or a DNS name is set.
type ShareConfig struct {
	// Server receives the peers' pushes (confighttp: endpoint, auth, TLS);
	// an empty endpoint receives none.
	Server confighttp.ServerConfig `mapstructure:"server"`
	// Client sends the pushes (confighttp: auth, TLS, headers, timeout,
	// compression); its endpoint is not read: every peer is one.
	Client confighttp.ClientConfig `mapstructure:"client"`
	// Peers are the URLs (scheme://host:port) of the other gateways' servers.
	Peers []string `mapstructure:"peers"`
	// DNS is a URL whose host name resolves to every gateway (a headless
	// Service), this one included: each address is a peer, on its port.
	DNS string `mapstructure:"dns"`
	// Interval is the time between two pushes.
	Interval time.Duration `mapstructure:"interval"`
	// MaxBytes bounds one message, pushed or received.
	MaxBytes int `mapstructure:"max_bytes"`

	_ struct{}
}

// enabled says whether the gateway shares what it learns.
func (c *ShareConfig) enabled() bool {
	return c.Server.NetAddr.Endpoint != "" || c.pushes()
}

// pushes says whether the gateway has peers to push to.
func (c *ShareConfig) pushes() bool { return len(c.Peers) > 0 || c.DNS != "" }

// minShareBytes is the least share::max_bytes: a message must hold the
// largest block of a place.
const minShareBytes = 64 << 10

func (c *ShareConfig) validate(check func(ok bool, key, format string, args ...any)) {
	check(c.Interval > 0, "share::interval", "must be positive, e.g. 1s; got %v", c.Interval)
	check(c.MaxBytes >= minShareBytes, "share::max_bytes", "must be at least %d, e.g. 1048576; got %d", minShareBytes, c.MaxBytes)
	check(c.Client.Endpoint == "", "share::client::endpoint", "is not read: list the peers in share::peers or share::dns; got %q", c.Client.Endpoint)
	for i, p := range c.Peers {
		check(peerURL(p, false), fmt.Sprintf("share::peers::%d", i), "must be an http(s) URL with a host, e.g. http://loom-gateway-1:4319; got %q", p)
	}
	check(c.DNS == "" || peerURL(c.DNS, true), "share::dns", "must be an http(s) URL with a host name and a port, e.g. http://loom-gateway-headless:4319; got %q", c.DNS)
}

// peerURL says whether s is an http(s) URL of a host (with a port when port is set) and no path.
func peerURL(s string, port bool) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != "" && (!port || u.Port() != "") &&
		(u.Path == "" || u.Path == "/") && u.RawQuery == ""
}

// HandoverConfig configures the hand-over of requests between gateways.
// The gateways place requests on the consistent hash ring of the agents'
// load_balancing exporter (internal/ring), built from the same members,
// which they follow with the same kind of resolver. Off unless self is set.
type HandoverConfig struct {
	// Self is this gateway's member as the resolver names it: host:port, the
	// pod's IP and the OTLP port the agents send to. An IPv6 address may come
	// without brackets (fd00::7:4317, as $(POD_IP):4317 spells it).
	Self string `mapstructure:"self"`
	// Resolver finds the gateways: exactly one of static and k8s.
	Resolver HandoverResolverConfig `mapstructure:"resolver"`
	// Client forwards records to their owner's OTLP/gRPC receiver
	// (configgrpc: TLS, auth, headers, compression); its endpoint is not
	// read: every member is one.
	Client configgrpc.ClientConfig `mapstructure:"client"`
	// Timeout bounds one forward; a forward that fails leaves its records
	// to be decided here.
	Timeout time.Duration `mapstructure:"timeout"`

	_ struct{}
}

// HandoverResolverConfig names the gateways' resolver, as the agents'
// load_balancing exporter does (its static and k8s resolvers).
type HandoverResolverConfig struct {
	Static StaticResolverConfig `mapstructure:"static"`
	K8s    K8sResolverConfig    `mapstructure:"k8s"`

	_ struct{}
}

// StaticResolverConfig lists the gateways.
type StaticResolverConfig struct {
	// Members are host:port, as the agents list them.
	Members []string `mapstructure:"members"`

	_ struct{}
}

// K8sResolverConfig follows the ready endpoints of a Service.
type K8sResolverConfig struct {
	// Service is name.namespace, or name in the pod's namespace.
	Service string `mapstructure:"service"`
	// Ports are the ports of every member, as the agents' resolver lists them.
	Ports []int32 `mapstructure:"ports"`

	_ struct{}
}

func (c *HandoverConfig) enabled() bool { return c.Self != "" }

// self is Self as the resolvers name members.
func (c *HandoverConfig) self() string { return bracketIPv6(c.Self) }

// bracketIPv6 names a member as the resolvers do: an IPv6 address in
// brackets, so fd00::7:4317 is [fd00::7]:4317.
func bracketIPv6(member string) string {
	if host, port, err := net.SplitHostPort(member); err == nil {
		return net.JoinHostPort(host, port)
	}
	if i := strings.LastIndexByte(member, ':'); i > 0 {
		if addr, err := netip.ParseAddr(member[:i]); err == nil && addr.Is6() {
			return net.JoinHostPort(addr.String(), member[i+1:])
		}
	}
	return member
}

func (c *HandoverConfig) validate(check func(ok bool, key, format string, args ...any)) {
	static, k8s := len(c.Resolver.Static.Members) > 0, c.Resolver.K8s.Service != ""
	if !c.enabled() {
		check(!static && !k8s, "handover::self", "must be set when a resolver is, e.g. 10.0.0.7:4317 (the pod's IP and OTLP port)")
		return
	}
	check(hostPort(c.self()), "handover::self", "must be host:port, e.g. 10.0.0.7:4317; got %q", c.Self)
	check(static != k8s, "handover::resolver", "must name exactly one of static and k8s")
	for i, m := range c.Resolver.Static.Members {
		key := fmt.Sprintf("handover::resolver::static::members::%d", i)
		// Refused, not rewritten: the ring must hold the members exactly as
		// the agents' load_balancing exporter lists (and dials) them.
		if bracketed := bracketIPv6(m); bracketed != m && hostPort(bracketed) {
			check(false, key, "an IPv6 address must be in brackets, as the agents list it: %s; got %q", bracketed, m)
			continue
		}
		check(hostPort(m), key, "must be host:port, e.g. loom-gateway-0:4317; got %q", m)
	}
	check(!k8s || !strings.ContainsAny(c.Resolver.K8s.Service, "/: "), "handover::resolver::k8s::service",
		"must be a Service's name.namespace, e.g. loom-gateway-headless.observability; got %q", c.Resolver.K8s.Service)
	check(!k8s || len(c.Resolver.K8s.Ports) > 0, "handover::resolver::k8s::ports", "must list the OTLP port the agents send to, e.g. [4317]")
	for i, p := range c.Resolver.K8s.Ports {
		check(p > 0 && p < 1<<16, fmt.Sprintf("handover::resolver::k8s::ports::%d", i), "must be 1 to 65535; got %d", p)
	}
	check(c.Client.Endpoint == "", "handover::client::endpoint", "is not read: every member the resolver finds is one; got %q", c.Client.Endpoint)
	check(c.Timeout > 0, "handover::timeout", "must be positive, e.g. 5s; got %v", c.Timeout)
}

// hostPort says whether s is host:port with a host and a port.
func hostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	return err == nil && host != "" && port != ""
}

// LearningConfig configures the hot-input learner behind hot_input policies
// and the failure map.
type LearningConfig struct {
	// HalfLife is how fast old requests and failures are forgotten.
	HalfLife time.Duration `mapstructure:"half_life"`
	// MinFailures is the decayed number of failures an input_hash or bucket
	// needs to become hot.
	MinFailures float64 `mapstructure:"min_failures"`
	// MinFailureRate is the failures ÷ requests it needs to become hot. A hot
	// key stays hot while it keeps above half of both thresholds.
	MinFailureRate float64 `mapstructure:"min_failure_rate"`
	// PrefixLength is the number of hex digits of an input_hash prefix bucket (1–3).
	PrefixLength int `mapstructure:"prefix_length"`
	// MaxHashes bounds the input hashes tracked; the least recently seen is evicted.
	MaxHashes int `mapstructure:"max_hashes"`

	_ struct{}
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks every setting and compiles every policy, so a bad
// configuration fails at startup with the key to fix.
func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
		}
	}
	check(c.NumShards >= 1 && c.NumShards <= maxShards, "num_shards",
		"must be 1 to %d, e.g. %d (unset: the number of CPUs the collector may use); got %d", maxShards, runtime.GOMAXPROCS(0), c.NumShards)
	check(c.DecisionWait > 0, "decision_wait", "must be positive, e.g. 30s; got %v", c.DecisionWait)
	check(c.MaxRequests > 0, "max_requests", "must be positive, e.g. 50000; got %d", c.MaxRequests)
	check(c.MaxBytes > 0, "max_bytes", "must be positive, e.g. 268435456 (256 MiB); got %d", c.MaxBytes)
	check(c.DecisionCache.TTL >= 0, "decision_cache::ttl", "must be 0 (no cache) or positive, e.g. 5m; got %v", c.DecisionCache.TTL)
	check(c.DecisionCache.TTL == 0 || c.DecisionCache.MaxEntries > 0, "decision_cache::max_entries",
		"must be positive when decision_cache::ttl is set, e.g. 200000; got %d", c.DecisionCache.MaxEntries)
	check(c.BasePercentage >= 0 && c.BasePercentage <= 100, "base_percentage", "must be 0 to 100, e.g. 1; got %v", c.BasePercentage)
	check(len(c.Policies) <= maxPolicies, "policies", "at most %d policies; got %d", maxPolicies, len(c.Policies))
	check(c.VolumeGuard.MaxShare >= 0 && c.VolumeGuard.MaxShare <= 1, "volume_guard::max_share",
		"must be 0 (off) to 1, e.g. 0.05; got %v", c.VolumeGuard.MaxShare)
	l := c.Learning
	check(l.HalfLife > 0, "learning::half_life", "must be positive, e.g. 1h; got %v", l.HalfLife)
	check(l.MinFailures >= 1, "learning::min_failures", "must be at least 1, e.g. 3; got %v", l.MinFailures)
	check(l.MinFailureRate > 0 && l.MinFailureRate <= 1, "learning::min_failure_rate", "must be above 0 and at most 1, e.g. 0.2; got %v", l.MinFailureRate)
	check(l.PrefixLength >= 1 && l.PrefixLength <= 3, "learning::prefix_length", "must be 1, 2 or 3 hex digits; got %d", l.PrefixLength)
	check(l.MaxHashes > 0, "learning::max_hashes", "must be positive, e.g. 100000; got %d", l.MaxHashes)
	c.Share.validate(check)
	c.Handover.validate(check)
	if _, err := compilePolicies(c, validationDeps()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// maxPolicies is the number of policies a request's record matches are kept
// for (one bit each).
const maxPolicies = 64

// hasPolicy reports whether a policy of type t is configured.
func (c *Config) hasPolicy(t PolicyType) bool {
	for _, p := range c.Policies {
		if p.Type == t {
			return true
		}
	}
	return false
}
