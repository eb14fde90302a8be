package goldenfieldprocessor

import (
	"errors"
	"fmt"
	"regexp"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/internal/golden"
)

// Config is the goldenfield processor's configuration.
type Config struct {
	Extract    ExtractConfig    `mapstructure:"extract"`
	Normalize  NormalizeConfig  `mapstructure:"normalize"`
	InputHash  InputHashConfig  `mapstructure:"input_hash"`
	Redaction  RedactionConfig  `mapstructure:"redaction"`
	Validation ValidationConfig `mapstructure:"validation"`
	Action     ActionConfig     `mapstructure:"action"`
	Drift      DriftConfig      `mapstructure:"drift"`
	// MaxServices bounds the services tracked for the per-service log-noise ratio.
	MaxServices int `mapstructure:"max_services"`

	_ struct{}
}

// ExtractConfig controls how fields are found in log bodies.
type ExtractConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// MaxBodyBytes is how much of a body is parsed; the rest is left as it is.
	MaxBodyBytes int `mapstructure:"max_body_bytes"`
	// MaxDepth is the deepest JSON object level flattened; deeper objects are kept as JSON text.
	MaxDepth int `mapstructure:"max_depth"`
	// MaxFields is the most fields taken from one body.
	MaxFields int `mapstructure:"max_fields"`
	// TextKeys are the keys found as key=value or key: value in plain-text bodies.
	TextKeys []string `mapstructure:"text_keys"`
	// Patterns are regular expressions run on plain-text bodies; each named
	// capture group becomes an attribute of that name.
	Patterns []string `mapstructure:"patterns"`

	_ struct{}
}

// NormalizeConfig controls alias, type and value normalization.
type NormalizeConfig struct {
	// Aliases are added to the default alias table (alias -> canonical name);
	// mapping a default alias to "" removes it.
	Aliases map[string]string `mapstructure:"aliases"`
	// Models maps model names as services write them to model_ver values.
	Models map[string]string `mapstructure:"models"`
	// NumericFields must hold numbers, like every resource_usage.* field;
	// numeric strings are converted.
	NumericFields []string `mapstructure:"numeric_fields"`
	// MaxValueBytes truncates longer string attribute values.
	MaxValueBytes int `mapstructure:"max_value_bytes"`

	_ struct{}
}

// InputHashConfig controls how input_hash is computed from raw input.
type InputHashConfig struct {
	// SourceFields hold raw input, in order of preference.
	SourceFields  []string                  `mapstructure:"source_fields"`
	Normalization golden.InputNormalization `mapstructure:"normalization"`

	_ struct{}
}

// RedactionMode says what happens to a sensitive attribute.
type RedactionMode string

const (
	RedactionRemove RedactionMode = "remove"
	RedactionMask   RedactionMode = "mask"
)

// RedactionConfig controls what sensitive data is removed before records leave.
type RedactionConfig struct {
	// Enabled is on by default; turning it off lets raw input leave the processor.
	Enabled bool          `mapstructure:"enabled"`
	Mode    RedactionMode `mapstructure:"mode"`
	// Attributes are sensitive attribute keys, redacted like raw input.
	Attributes []string `mapstructure:"attributes"`
	// BodyPatterns are built-in patterns masked in bodies: email, phone, api_key.
	BodyPatterns []string `mapstructure:"body_patterns"`
	// CustomPatterns are regular expressions masked in bodies.
	CustomPatterns []string `mapstructure:"custom_patterns"`

	_ struct{}
}

// Profile names a built-in set of required fields.
type Profile string

const (
	// ProfileGolden requires the golden five: req_id, stage, input_hash, model_ver, resource_usage.*.
	ProfileGolden Profile = "golden"
	// ProfileFull adds the fuller set some teams mandate.
	ProfileFull Profile = "full"
)

// ValidationConfig controls what a valid record is.
type ValidationConfig struct {
	Profile Profile `mapstructure:"profile"`
	// Required fields are added to the profile's.
	Required []string `mapstructure:"required"`
	// ReqIDFormats are accepted besides the default req-{unix_ms}-{alnum:6},
	// e.g. req-celery-{uuid} or req_{ts}_{hex}.
	ReqIDFormats []string `mapstructure:"req_id_formats"`
	// Patterns are regular expressions a field's value must match when present;
	// they replace the built-in ones for stage and input_hash.
	Patterns map[string]string `mapstructure:"patterns"`
	// Rules are custom checks written as OTTL conditions.
	Rules []RuleConfig `mapstructure:"rules"`
	// PerService requires a field only of records of a service whose
	// records have carried it; off, every record must carry every
	// required field.
	PerService bool `mapstructure:"per_service"`

	_ struct{}
}

// RuleConfig is a custom validation rule. A rule applies to the signals whose
// OTTL context (log, span) can parse its condition.
type RuleConfig struct {
	Name string `mapstructure:"name"`
	// Condition is an OTTL condition that is true when a record breaks the rule.
	Condition string `mapstructure:"condition"`

	_ struct{}
}

// ActionMode says what happens to a record that fails validation.
type ActionMode string

const (
	ActionTag  ActionMode = "tag"
	ActionDrop ActionMode = "drop"
)

// ActionConfig controls what happens to records that fail validation.
type ActionConfig struct {
	Mode ActionMode `mapstructure:"mode"`
	// DropReasons limit drop mode to records failing for one of them: missing,
	// invalid or rule, optionally narrowed to a field or rule name (missing:req_id,
	// rule:forward_has_latency). Empty drops every failing record.
	DropReasons []string `mapstructure:"drop_reasons"`

	_ struct{}
}

// DriftConfig controls schema drift detection.
type DriftConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// MaxSeries bounds the (signal, service, stage, model_ver) series tracked;
	// the least recently seen is evicted.
	MaxSeries int `mapstructure:"max_series"`
	// MaxFields bounds the fields tracked per series.
	MaxFields int `mapstructure:"max_fields"`
	// MinRecords is how many records each version needs before they are compared.
	MinRecords int `mapstructure:"min_records"`
	// PresentRate is the share of the previous version's records that must
	// carry a field for it to count as always carried.
	PresentRate float64 `mapstructure:"present_rate"`
	// AbsentRate is the share at or below which the new version no longer carries it.
	AbsentRate float64 `mapstructure:"absent_rate"`

	_ struct{}
}

var _ confmap.Validator = (*Config)(nil)

// Validate checks ranges and compiles every pattern, format and OTTL condition,
// so a bad configuration fails at startup with the key to fix.
func (c *Config) Validate() error {
	errs := c.checkRanges()
	if _, err := compile(c, component.TelemetrySettings{Logger: zap.NewNop()}); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c *Config) checkRanges() []error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
		}
	}
	check(c.Extract.MaxBodyBytes > 0, "extract::max_body_bytes", "must be positive, got %d", c.Extract.MaxBodyBytes)
	check(c.Extract.MaxDepth >= 1 && c.Extract.MaxDepth <= 64, "extract::max_depth", "must be 1..64, got %d", c.Extract.MaxDepth)
	check(c.Extract.MaxFields >= 1 && c.Extract.MaxFields <= 1024, "extract::max_fields", "must be 1..1024, got %d", c.Extract.MaxFields)
	check(c.Normalize.MaxValueBytes >= 64, "normalize::max_value_bytes", "must be at least 64, got %d", c.Normalize.MaxValueBytes)
	check(c.InputHash.Normalization.Valid(), "input_hash::normalization", "must be whitespace, lowercase or none, got %q", c.InputHash.Normalization)
	check(c.Redaction.Mode == RedactionRemove || c.Redaction.Mode == RedactionMask, "redaction::mode", "must be remove or mask, got %q", c.Redaction.Mode)
	check(c.Validation.Profile == ProfileGolden || c.Validation.Profile == ProfileFull, "validation::profile", "must be golden or full, got %q", c.Validation.Profile)
	check(c.Action.Mode == ActionTag || c.Action.Mode == ActionDrop, "action::mode", "must be tag or drop, got %q", c.Action.Mode)
	check(c.Action.Mode == ActionDrop || len(c.Action.DropReasons) == 0, "action::drop_reasons", "only applies with action::mode: drop")
	check(c.MaxServices >= 1, "max_services", "must be positive, got %d", c.MaxServices)
	if c.Drift.Enabled {
		check(c.Drift.MaxSeries >= 2, "drift::max_series", "must be at least 2 (two versions to compare), got %d", c.Drift.MaxSeries)
		check(c.Drift.MaxFields >= 1, "drift::max_fields", "must be positive, got %d", c.Drift.MaxFields)
		check(c.Drift.MinRecords >= 1, "drift::min_records", "must be positive, got %d", c.Drift.MinRecords)
		check(c.Drift.AbsentRate >= 0 && c.Drift.AbsentRate < c.Drift.PresentRate && c.Drift.PresentRate <= 1,
			"drift::absent_rate, drift::present_rate", "need 0 <= absent_rate < present_rate <= 1, got %g and %g", c.Drift.AbsentRate, c.Drift.PresentRate)
	}
	return errs
}

// compileRegexps compiles each pattern; errors name key[i].
func compileRegexps(key string, patterns []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%s::%d: %w", key, i, err)
		}
		out[i] = re
	}
	return out, nil
}
