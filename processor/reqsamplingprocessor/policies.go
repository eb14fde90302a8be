package reqsamplingprocessor

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/learner"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/policy"
)

// basePolicy is the name kept requests carry when no policy matched them.
const basePolicy = "base_rate"

// compiledPolicy is one configured policy, ready to evaluate.
type compiledPolicy struct {
	name string
	// probability of keeping a matching request, in (0, 1].
	probability float64
	// failure is true when a match means the request failed.
	failure  bool
	eval     policy.Evaluator
	detector policy.Detector // the failure policies' evaluator; nil for the others
	observer policy.Observer // nil unless the policy learns from decided requests
}

// policyDeps is what policies need besides their configuration.
type policyDeps struct {
	set     component.TelemetrySettings
	learner *learner.Learner
	// evalFailed returns the callback of policy i for records it cannot evaluate.
	evalFailed func(i int) func(error)
	// seriesEvicted is called for every latency place evicted, driftEvicted
	// for every value-drift place.
	seriesEvicted, driftEvicted func()
	now                         func() time.Time
	// outbox bounds what a learned detector keeps for the peers between
	// two pushes; 0 when nothing is shared.
	outbox int
}

// validationDeps compile policies only to check them.
func validationDeps() policyDeps {
	return policyDeps{
		set:           component.TelemetrySettings{Logger: zap.NewNop()},
		evalFailed:    func(int) func(error) { return func(error) {} },
		seriesEvicted: func() {},
		driftEvicted:  func() {},
		now:           time.Now,
	}
}

// compilePolicies builds c.Policies; errors name the key to fix.
func compilePolicies(c *Config, deps policyDeps) ([]compiledPolicy, error) {
	var errs []error
	out := make([]compiledPolicy, 0, len(c.Policies))
	names := map[string]bool{}
	for i, pc := range c.Policies {
		key := fmt.Sprintf("policies::%d", i)
		if pc.Name == "" || pc.Name == basePolicy || names[pc.Name] {
			errs = append(errs, fmt.Errorf("%s::name: %q must be set, unique and not %q", key, pc.Name, basePolicy))
		}
		names[pc.Name] = true
		percentage := pc.Percentage
		if percentage == 0 {
			percentage = 100
		}
		if percentage < 0 || percentage > 100 {
			errs = append(errs, fmt.Errorf("%s::percentage: must be above 0 and at most 100 (unset: 100); got %v", key, pc.Percentage))
		}
		eval, err := newEvaluator(&pc, i, deps)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s::%w", key, err))
			continue
		}
		cp := compiledPolicy{name: pc.Name, probability: percentage / 100, failure: pc.Type.failure(), eval: eval}
		cp.observer, _ = eval.(policy.Observer)
		cp.detector, _ = eval.(policy.Detector)
		out = append(out, cp)
	}
	return out, errors.Join(errs...)
}

// newEvaluator is the one switch from policy type to implementation.
// Errors start with the YAML key under the policy.
func newEvaluator(pc *PolicyConfig, i int, deps policyDeps) (policy.Evaluator, error) {
	switch pc.Type {
	case Errors:
		name := pc.Errors.MinSeverity
		if name == "" {
			name = "error"
		}
		severity, ok := policy.ParseSeverity(name)
		if !ok {
			return nil, fmt.Errorf("errors::min_severity: must be trace, debug, info, warn, error or fatal; got %q", pc.Errors.MinSeverity)
		}
		if pc.Errors.Attributes != nil && len(pc.Errors.Attributes) == 0 {
			return nil, errors.New("errors::attributes: an empty list checks no attribute; leave it unset for the defaults " +
				"(" + strings.Join(failure.DefaultErrorAttributes, ", ") + ") or list the attributes that report an error")
		}
		if pc.Errors.FailureFinishReasons != nil && len(pc.Errors.FailureFinishReasons) == 0 {
			return nil, errors.New("errors::failure_finish_reasons: an empty list reads no finish reason as a failure; " +
				"leave it unset for the default ([" + strings.Join(failure.DefaultFailureFinishReasons, ", ") + "]) or set semantic_conventions: false")
		}
		return policy.NewErrors(pc.Name, failure.ExplicitConfig{
			MinSeverity:          severity,
			Attributes:           pc.Errors.Attributes,
			IgnoreConventions:    pc.Errors.SemanticConventions != nil && !*pc.Errors.SemanticConventions,
			FailureFinishReasons: pc.Errors.FailureFinishReasons,
		}), nil
	case FailureCondition:
		c, err := failure.NewConditions(pc.FailureCondition.Conditions, deps.set, deps.evalFailed(i))
		if err != nil {
			return nil, fmt.Errorf("failure_condition::conditions%w", err)
		}
		return policy.NewFailureCondition(pc.Name, c), nil
	case Latency:
		return newLatency(pc.Name, &pc.Latency, deps)
	case ValueDrift:
		return newValueDrift(pc.Name, &pc.ValueDrift, deps)
	case Stage:
		p, err := policy.NewStage(pc.Stage.Patterns)
		if err != nil {
			return nil, fmt.Errorf("stage::patterns%w", err)
		}
		return p, nil
	case InputHash:
		p, err := policy.NewInputHash(pc.InputHash.Ranges)
		if err != nil {
			return nil, fmt.Errorf("input_hash::ranges%w", err)
		}
		return p, nil
	case HotInput:
		return policy.NewHotInput(deps.learner), nil
	case GoldenInvalid:
		return policy.GoldenInvalid{}, nil
	}
	return nil, fmt.Errorf("type: %q is not one of errors, failure_condition, latency, value_drift, stage, input_hash, hot_input, golden_invalid", pc.Type)
}

func newLatency(name string, c *LatencyConfig, deps policyDeps) (policy.Evaluator, error) {
	cfg := failure.LatencyConfig{
		Threshold:  c.Threshold,
		Quantile:   cmpOr(c.Quantile, 0.995),
		Factor:     cmpOr(c.Factor, 2),
		MinExcess:  cmpOr(c.MinExcess, 5*time.Millisecond),
		MinSamples: float64(cmpOr(c.MinSamples, 100)),
		HalfLife:   cmpOr(c.HalfLife, 10*time.Minute),
		MaxPlaces:  cmpOr(c.MaxSeries, 1000),
	}
	var errs []error
	if c.Threshold < 0 || c.Quantile < 0 || c.Quantile >= 1 {
		errs = append(errs, fmt.Errorf("latency: threshold must not be negative and quantile must be above 0 and below 1 (unset: 0.995); got %v and %v",
			c.Threshold, c.Quantile))
	}
	if c.Factor != 0 && c.Factor < 1 {
		errs = append(errs, fmt.Errorf("latency::factor: must be at least 1 (unset: 2); got %v", c.Factor))
	}
	if c.MinSamples < 0 || c.HalfLife < 0 || c.MaxSeries < 0 || c.MinExcess < 0 {
		errs = append(errs, errors.New("latency.min_samples, latency.half_life, latency.max_series, latency.min_excess: must not be negative (unset: 100, 10m, 1000, 5ms)"))
	}
	if len(errs) > 0 {
		return nil, oneLine(errs)
	}
	return policy.NewLatency(name, failure.NewLatency(cfg, deps.seriesEvicted), deps.now), nil
}

func newValueDrift(name string, c *ValueDriftConfig, deps policyDeps) (policy.Evaluator, error) {
	cfg := failure.DriftConfig{
		RareShare:       cmpOr(c.RareShare, 0.05),
		SurgeRatio:      cmpOr(c.SurgeRatio, 4),
		MinCount:        cmpOr(c.MinCount, 4),
		BaselineRecords: cmpOr(c.BaselineRecords, 20000),
		RecentRecords:   cmpOr(c.RecentRecords, 400),
		MinBaseline:     cmpOr(c.MinBaseline, 48),
		MaxPlaces:       cmpOr(c.MaxPlaces, 2000),
		MaxAttributes:   cmpOr(c.MaxAttributes, 64),
		MaxValues:       cmpOr(c.MaxValues, 24),
		Outbox:          deps.outbox,
	}
	var errs []error
	if cfg.RareShare <= 0 || cfg.RareShare >= 1 {
		errs = append(errs, fmt.Errorf("value_drift::rare_share: must be above 0 and below 1 (unset: 0.05); got %v", c.RareShare))
	}
	if cfg.SurgeRatio <= 1 {
		errs = append(errs, fmt.Errorf("value_drift::surge_ratio: must be above 1 (unset: 4); got %v", c.SurgeRatio))
	}
	if cfg.RecentRecords < 1 || cfg.BaselineRecords <= cfg.RecentRecords {
		errs = append(errs, fmt.Errorf("value_drift::baseline_records, value_drift::recent_records: recent_records must be at least 1 "+
			"and baseline_records above it (unset: 20000, 400); got %v and %v", c.BaselineRecords, c.RecentRecords))
	}
	if cfg.MinCount < 0 || cfg.MinBaseline < 0 || cfg.MaxPlaces < 0 || cfg.MaxAttributes < 0 || cfg.MaxValues < 0 {
		errs = append(errs, errors.New("value_drift.min_count, min_baseline, max_places, max_attributes, max_values: must not be negative"))
	}
	if len(errs) > 0 {
		return nil, oneLine(errs)
	}
	return policy.NewValueDrift(name, failure.NewDrift(cfg, deps.driftEvicted)), nil
}

// oneLine joins errors into one line, so that the policy's key prefixes all of them.
func oneLine(errs []error) error {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// cmpOr returns v, or def when v is zero.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
