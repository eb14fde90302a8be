package reqsamplingprocessor

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

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
	observer policy.Observer // nil unless the policy learns from decided requests
}

// policyDeps is what policies need besides their configuration.
type policyDeps struct {
	set     component.TelemetrySettings
	learner *learner.Learner
	// evalFailed returns the callback of policy i for records it cannot evaluate.
	evalFailed func(i int) func(error)
	// seriesEvicted is called for every latency series evicted.
	seriesEvicted func()
}

// validationDeps compile policies only to check them.
func validationDeps() policyDeps {
	return policyDeps{
		set:           component.TelemetrySettings{Logger: zap.NewNop()},
		evalFailed:    func(int) func(error) { return func(error) {} },
		seriesEvicted: func() {},
	}
}

// compilePolicies builds c.Policies; errors name the key to fix.
func compilePolicies(c *Config, deps policyDeps) ([]compiledPolicy, error) {
	var errs []error
	out := make([]compiledPolicy, 0, len(c.Policies))
	names := map[string]bool{}
	for i, pc := range c.Policies {
		key := fmt.Sprintf("policies[%d]", i)
		if pc.Name == "" || pc.Name == basePolicy || names[pc.Name] {
			errs = append(errs, fmt.Errorf("%s.name: %q must be set, unique and not %q", key, pc.Name, basePolicy))
		}
		names[pc.Name] = true
		percentage := pc.Percentage
		if percentage == 0 {
			percentage = 100
		}
		if percentage < 0 || percentage > 100 {
			errs = append(errs, fmt.Errorf("%s.percentage: must be above 0 and at most 100 (unset: 100); got %v", key, pc.Percentage))
		}
		eval, err := newEvaluator(&pc, i, deps)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%w", key, err))
			continue
		}
		cp := compiledPolicy{name: pc.Name, probability: percentage / 100, failure: pc.Type.failure(), eval: eval}
		cp.observer, _ = eval.(policy.Observer)
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
			return nil, fmt.Errorf("errors.min_severity: must be trace, debug, info, warn, error or fatal; got %q", pc.Errors.MinSeverity)
		}
		return policy.NewErrors(severity, pc.Errors.Attributes), nil
	case FailureCondition:
		p, err := policy.NewFailureCondition(pc.FailureCondition.Conditions, deps.set, deps.evalFailed(i))
		if err != nil {
			return nil, fmt.Errorf("failure_condition.conditions%w", err)
		}
		return p, nil
	case Latency:
		return newLatency(&pc.Latency, deps)
	case Stage:
		p, err := policy.NewStage(pc.Stage.Patterns)
		if err != nil {
			return nil, fmt.Errorf("stage.patterns%w", err)
		}
		return p, nil
	case InputHash:
		p, err := policy.NewInputHash(pc.InputHash.Ranges)
		if err != nil {
			return nil, fmt.Errorf("input_hash.ranges%w", err)
		}
		return p, nil
	case HotInput:
		return policy.NewHotInput(deps.learner), nil
	case GoldenInvalid:
		return policy.GoldenInvalid{}, nil
	}
	return nil, fmt.Errorf("type: %q is not one of errors, failure_condition, latency, stage, input_hash, hot_input, golden_invalid", pc.Type)
}

func newLatency(c *LatencyConfig, deps policyDeps) (policy.Evaluator, error) {
	cfg := policy.LatencyConfig{
		Threshold:  c.Threshold,
		Quantile:   c.Quantile,
		MinSamples: float64(cmpOr(c.MinSamples, 100)),
		HalfLife:   cmpOr(c.HalfLife, 10*time.Minute),
		MaxSeries:  cmpOr(c.MaxSeries, 1000),
	}
	var errs []error
	if c.Threshold < 0 || c.Quantile < 0 || c.Quantile >= 1 || (c.Threshold == 0 && c.Quantile == 0) {
		errs = append(errs, fmt.Errorf("latency: set threshold (e.g. 2s) or quantile (above 0, below 1, e.g. 0.99), or both; got %v and %v",
			c.Threshold, c.Quantile))
	}
	if c.MinSamples < 0 || c.HalfLife < 0 || c.MaxSeries < 0 {
		errs = append(errs, errors.New("latency.min_samples, latency.half_life, latency.max_series: must not be negative (unset: 100, 10m, 1000)"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return policy.NewLatency(cfg, deps.seriesEvicted), nil
}

// cmpOr returns v, or def when v is zero.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
