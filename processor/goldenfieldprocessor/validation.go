package goldenfieldprocessor

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/golden"
)

// failureReason is why a record failed validation; the values index telemetry tallies.
type failureReason uint8

const (
	reasonMissing failureReason = iota
	reasonInvalid
	reasonRule
	numReasons
)

var reasonNames = [numReasons]string{"missing", "invalid", "rule"}

// failure is one validation failure: a missing or invalid field, or a broken rule.
type failure struct {
	reason failureReason
	field  string // the field, or the rule name
}

// profileFields are the required fields of each built-in profile. Names are
// resolved through the alias table, so "duration_ms" requires resource_usage.latency_ms.
var profileFields = map[Profile][]string{
	ProfileGolden: {golden.ReqID, golden.Stage, golden.InputHash, golden.ModelVer, golden.ResourceUsagePrefix + "*"},
	ProfileFull: {
		golden.ReqID, golden.Stage, golden.InputHash, golden.ModelVer, golden.ResourceUsagePrefix + "*",
		"service.name", "span_id", "level", "event", "duration_ms", "status_code", "model_name",
		golden.InputTokens, golden.OutputTokens,
	},
}

// defaultChecks check the values of golden fields that have a fixed shape
// (req_id has its own formats); validation.patterns replaces them per field.
var defaultChecks = map[string]func(string) bool{
	golden.Stage:     isStagePath,
	golden.InputHash: isInputHash,
}

// isStagePath accepts lowercase /-separated paths of [a-z0-9_-] segments.
func isStagePath(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' {
			if i == 0 || i == len(s)-1 || s[i-1] == '/' {
				return false
			}
			continue
		}
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return s != ""
}

// isInputHash accepts golden.InputHashLen lowercase hex digits.
func isInputHash(s string) bool {
	if len(s) != golden.InputHashLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

// recordView is what validation needs to know about a log record or span.
type recordView struct {
	attrs   pcommon.Map
	service string // from the resource; empty when unset
	// Fields that live outside the attributes.
	hasSpanID, hasLevel, hasEvent, hasStatus bool
	// reportsError is a log record at ERROR or above, or a span with an error
	// status: its fields are the error path's, not its version's schema.
	reportsError bool
}

func (r *recordView) has(name string) bool {
	v, ok := r.attrs.Get(name)
	return ok && (v.Type() != pcommon.ValueTypeStr || v.Str() != "")
}

// requirement is one required field and how to tell it is present.
type requirement struct {
	name    string
	present func(*recordView) bool
}

// newRequirement resolves a required field name: an alias means its canonical
// name, "prefix.*" any attribute under prefix, and record fields outside the
// attributes (span_id, level, event, status_code, service.name) count too.
func newRequirement(name string, fields map[string]fieldRole) requirement {
	if role := fields[name]; role.canonical != "" {
		name = role.canonical
	}
	present := func(r *recordView) bool { return r.has(name) }
	switch name {
	case "service.name":
		present = func(r *recordView) bool { return r.service != "" || r.has(name) }
	case "span_id":
		present = func(r *recordView) bool { return r.hasSpanID || r.has(name) }
	case "level":
		present = func(r *recordView) bool { return r.hasLevel || r.has(name) }
	case "event":
		present = func(r *recordView) bool { return r.hasEvent || r.has(name) || r.has("event.name") }
	case "status_code":
		present = func(r *recordView) bool { return r.hasStatus || r.has(name) || r.has("http.response.status_code") }
	}
	if prefix, ok := strings.CutSuffix(name, "*"); ok {
		present = func(r *recordView) bool {
			found := false
			r.attrs.Range(func(k string, _ pcommon.Value) bool {
				found = strings.HasPrefix(k, prefix)
				return !found
			})
			return found
		}
	}
	return requirement{name: name, present: present}
}

// fieldCheck is a format a field's value must have when present.
type fieldCheck struct {
	field string
	match func(string) bool
}

// rule is a custom validation rule compiled for one OTTL context.
type rule[K any] struct {
	name      string
	condition *ottl.Condition[K]
}

// validator checks records against the contract.
type validator struct {
	required []requirement
	// carried is what each service's records have carried, shared by the
	// component's pipelines; nil when every required field is required of
	// every record (validation::per_service off).
	carried   *carriedFields
	reqIDs    *golden.ReqIDMatcher
	checks    []fieldCheck
	logRules  []rule[*ottllog.TransformContext]
	spanRules []rule[*ottlspan.TransformContext]
}

func newValidator(c *ValidationConfig, fields map[string]fieldRole, set component.TelemetrySettings) (*validator, []error) {
	var errs []error
	v := &validator{}
	seen := map[string]bool{}
	for _, name := range slices.Concat(profileFields[c.Profile], c.Required) {
		if req := newRequirement(name, fields); !seen[req.name] {
			seen[req.name] = true
			v.required = append(v.required, req)
		}
	}
	for i, name := range c.Required {
		if name == "" {
			errs = append(errs, fmt.Errorf("validation::required::%d: empty field name", i))
		}
	}
	var err error
	if v.reqIDs, err = golden.NewReqIDMatcher(c.ReqIDFormats); err != nil {
		errs = append(errs, fmt.Errorf("validation::req_id_formats: %w", err))
	}
	checks := maps.Clone(defaultChecks)
	for field, pattern := range c.Patterns {
		re, err := regexp.Compile(pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("validation::patterns::%s: %w", field, err))
			continue
		}
		checks[field] = re.MatchString
	}
	for _, field := range slices.Sorted(maps.Keys(checks)) {
		v.checks = append(v.checks, fieldCheck{field, checks[field]})
	}
	errs = append(errs, v.compileRules(c.Rules, set)...)
	return v, errs
}

// compileRules parses each rule for the log and span contexts; a rule applies
// to each signal whose context parses it.
func (v *validator) compileRules(rules []RuleConfig, set component.TelemetrySettings) []error {
	if len(rules) == 0 {
		return nil
	}
	logParser, err := ottllog.NewParser(ottlfuncs.StandardConverters[*ottllog.TransformContext](), set)
	if err != nil {
		return []error{err}
	}
	spanParser, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set)
	if err != nil {
		return []error{err}
	}
	var errs []error
	names := map[string]bool{}
	for i, r := range rules {
		key := fmt.Sprintf("validation::rules::%d", i)
		if r.Name == "" || names[r.Name] {
			errs = append(errs, fmt.Errorf("%s.name: %q must be set and unique", key, r.Name))
		}
		names[r.Name] = true
		if strings.TrimSpace(r.Condition) == "" {
			errs = append(errs, fmt.Errorf("%s.condition: empty; write an OTTL condition that is true when a record breaks the rule", key))
			continue
		}
		logCond, logErr := logParser.ParseCondition(r.Condition)
		spanCond, spanErr := spanParser.ParseCondition(r.Condition)
		if logErr != nil && spanErr != nil {
			errs = append(errs, fmt.Errorf("%s.condition: neither the log nor the span context parses it: %w", key, errors.Join(logErr, spanErr)))
			continue
		}
		if logErr == nil {
			v.logRules = append(v.logRules, rule[*ottllog.TransformContext]{r.Name, logCond})
		}
		if spanErr == nil {
			v.spanRules = append(v.spanRules, rule[*ottlspan.TransformContext]{r.Name, spanCond})
		}
	}
	return errs
}

// check appends a failure for every required field missing (with
// per_service: that its service's records have carried) and every field
// whose value breaks its format.
func (v *validator) check(r *recordView, sc *scratch) {
	var present fieldSet
	for i := range v.required {
		if v.required[i].present(r) {
			present.add(i)
		}
	}
	expected := allFields
	if v.carried != nil {
		expected = v.carried.note(r.service, present)
	}
	for i := range v.required {
		if !present.has(i) && expected.has(i) {
			sc.failures = append(sc.failures, failure{reasonMissing, v.required[i].name})
		}
	}
	if id, ok := r.attrs.Get(golden.ReqID); ok && (id.Type() != pcommon.ValueTypeStr || id.Str() != "") {
		if id.Type() != pcommon.ValueTypeStr || !v.validReqID(id.Str(), r.attrs) {
			sc.failures = append(sc.failures, failure{reasonInvalid, golden.ReqID})
		}
	}
	for _, check := range v.checks {
		val, ok := r.attrs.Get(check.field)
		if !ok || val.Type() == pcommon.ValueTypeStr && val.Str() == "" {
			continue
		}
		if val.Type() != pcommon.ValueTypeStr || !check.match(val.Str()) {
			sc.failures = append(sc.failures, failure{reasonInvalid, check.field})
		}
	}
}

// validReqID accepts an id of a configured format, and the key of a
// trace that an earlier tier gave a request that carries no req_id.
func (v *validator) validReqID(id string, attrs pcommon.Map) bool {
	if _, valid := v.reqIDs.Parse(id); valid {
		return true
	}
	return golden.KeyedByTrace(attrs) && golden.IsTraceKey(id)
}

// tag records the outcome on the record: golden.valid, and the golden.missing
// and golden.invalid lists when it failed.
func tag(attrs pcommon.Map, failures []failure) {
	attrs.PutBool(golden.ValidAttr, len(failures) == 0)
	attrs.Remove(golden.MissingAttr)
	attrs.Remove(golden.InvalidAttr)
	var missing, invalid pcommon.Slice
	for _, f := range failures {
		switch f.reason {
		case reasonMissing:
			if missing == (pcommon.Slice{}) {
				missing = attrs.PutEmptySlice(golden.MissingAttr)
			}
			missing.AppendEmpty().SetStr(f.field)
		default:
			if invalid == (pcommon.Slice{}) {
				invalid = attrs.PutEmptySlice(golden.InvalidAttr)
			}
			if f.reason == reasonRule {
				invalid.AppendEmpty().SetStr("rule:" + f.field)
			} else {
				invalid.AppendEmpty().SetStr(f.field)
			}
		}
	}
}

// dropPolicy decides which failing records drop mode drops.
type dropPolicy struct {
	enabled bool
	any     [numReasons]bool            // every failure of this reason drops
	fields  [numReasons]map[string]bool // failures of this reason for these fields drop
}

func newDropPolicy(c *ActionConfig) (dropPolicy, []error) {
	p := dropPolicy{enabled: c.Mode == ActionDrop}
	if len(c.DropReasons) == 0 {
		p.any = [numReasons]bool{true, true, true}
		return p, nil
	}
	var errs []error
	for i, entry := range c.DropReasons {
		reasonName, field, narrowed := strings.Cut(entry, ":")
		reason := failureReason(slices.Index(reasonNames[:], reasonName))
		switch {
		case reason >= numReasons:
			errs = append(errs, fmt.Errorf("action::drop_reasons::%d: %q must start with missing, invalid or rule (e.g. missing:req_id)", i, entry))
		case !narrowed:
			p.any[reason] = true
		case field == "":
			errs = append(errs, fmt.Errorf("action::drop_reasons::%d: %q names no field or rule after the colon", i, entry))
		default:
			if p.fields[reason] == nil {
				p.fields[reason] = map[string]bool{}
			}
			p.fields[reason][field] = true
		}
	}
	return p, errs
}

// match returns the reason of the first failure the policy drops for.
func (p *dropPolicy) match(failures []failure) (failureReason, bool) {
	if !p.enabled {
		return 0, false
	}
	for _, f := range failures {
		if p.any[f.reason] || p.fields[f.reason][f.field] {
			return f.reason, true
		}
	}
	return 0, false
}
