package goldenfieldprocessor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/internal/extract"
	failmodel "github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadata"
)

const (
	signalLogs   = "logs"
	signalTraces = "traces"
)

// compiled is a Config turned into the tables and matchers the hot path uses.
type compiled struct {
	cfg          *Config
	fields       map[string]fieldRole
	segments     map[string]segmentKind      // classify's table of path segments
	paths        map[string][]configuredPath // dotted raw input and sensitive keys, by last segment
	roles        *roleTable                  // role's answers
	models       map[string]string
	jsonLimits   extract.JSONLimits
	text         *extract.Text
	bodyPatterns []bodyPattern
	secretNames  []string // raw input and sensitive keys, searched for in unparsed body text
	keyNames     []string // those and the content words, searched for as keys in text (keyMention)
	validator    *validator
	drop         dropPolicy
}

// compile checks and compiles everything in c that can fail; errors name the config key.
func compile(c *Config, set component.TelemetrySettings) (*compiled, error) {
	var errs []error
	collect := func(e []error) { errs = append(errs, e...) }
	cc := &compiled{
		cfg:        c,
		models:     c.Normalize.Models,
		jsonLimits: extract.JSONLimits{MaxDepth: c.Extract.MaxDepth, MaxFields: c.Extract.MaxFields},
	}
	var e []error
	cc.fields, e = newFieldTable(c)
	collect(e)
	cc.segments, cc.paths = newSegmentKinds(c)
	cc.roles = newRoleTable(cc.fields)
	if _, err := extract.NewText(c.Extract.TextKeys, nil); err != nil {
		errs = append(errs, fmt.Errorf("extract::text_keys: %w", err))
	}
	if _, err := extract.NewText(nil, c.Extract.Patterns); err != nil {
		errs = append(errs, fmt.Errorf("extract::patterns: %w", err))
	}
	for model, ver := range c.Normalize.Models {
		if model == "" || ver == "" {
			errs = append(errs, fmt.Errorf("normalize::models::%s: model names and versions must not be empty", model))
		}
	}
	cc.bodyPatterns, e = compileBodyPatterns(&c.Redaction)
	collect(e)
	cc.secretNames = slices.Concat(c.InputHash.SourceFields, c.Redaction.Attributes)
	for _, name := range slices.Concat(cc.secretNames, contentWords, []string{"input", "output"}) {
		cc.keyNames = append(cc.keyNames, strings.ToLower(name))
	}
	slices.Sort(cc.keyNames)
	cc.keyNames = slices.Compact(cc.keyNames)
	cc.validator, e = newValidator(&c.Validation, cc.fields, set)
	collect(e)
	cc.drop, e = newDropPolicy(&c.Action)
	collect(e)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cc.text, _ = extract.NewText(c.Extract.TextKeys, c.Extract.Patterns)
	return cc, nil
}

// scratch is per-record working state, reused across the records of a batch.
type scratch struct {
	fields    []extract.Field // found in the body
	roles     []keyRole       // of the record's attributes, in order, as normalize found them
	format    bodyFormat
	oversized bool            // the body was parsed only up to max_body_bytes
	inputs    []string        // raw input attributes present
	secrets   []string        // sensitive attributes present
	aliases   []aliasValue    // alias attributes present
	preferred []aliasValue    // those of them that win over the others (golden.Alias.Preferred)
	held      []pcommon.Value // values moved out of records (hold), reused
	holding   int             // of held, by this record
	numeric   []string        // numeric attributes present
	conflicts []string        // golden.conflicts entries of this record (copyAliases)
	failures  []failure
	masks     []bodyMask
	// The keys met by position in the batch's last record, by normalize,
	// removeAttributes and maskFields (roleAt).
	normalizing, removing, masking []positionedRole
	stages                         batchMemo // normalizeStage's answers
	families                       batchMemo // golden.ModelFamily's answers
}

// maxRemembered bounds the answers a batchMemo keeps.
const maxRemembered = 64

// batchMemo remembers a function's answers across the records of a batch:
// they mostly share a few stage names and model versions, written as their
// services write them.
type batchMemo map[string]string

func (m *batchMemo) get(s string, f func(string) string) string {
	if answer, ok := (*m)[s]; ok {
		return answer
	}
	answer := f(s)
	if len(*m) < maxRemembered {
		if *m == nil {
			*m = batchMemo{}
		}
		(*m)[s] = answer
	}
	return answer
}

func (sc *scratch) reset() {
	sc.fields, sc.format, sc.oversized = sc.fields[:0], formatNone, false
	sc.inputs, sc.secrets, sc.aliases, sc.numeric = sc.inputs[:0], sc.secrets[:0], sc.aliases[:0], sc.numeric[:0]
	sc.preferred, sc.holding, sc.conflicts = sc.preferred[:0], 0, sc.conflicts[:0]
	sc.roles = sc.roles[:0]
	sc.failures = sc.failures[:0]
}

type goldenProcessor struct {
	c         *compiled
	logger    *zap.Logger
	telemetry *telemetry
	tracker   *driftTracker // nil when drift detection is off
	release   func()
}

func newGoldenProcessor(set processor.Settings, cfg *Config, tracker *driftTracker, carried *carriedFields, emitsLogs bool, releaseShared func()) (*goldenProcessor, error) {
	if errs := cfg.checkRanges(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c, err := compile(cfg, set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	c.validator.carried = carried
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	tel, err := newTelemetry(tb, cfg.MaxServices)
	if err != nil {
		tb.Shutdown()
		return nil, err
	}
	p := &goldenProcessor{c: c, logger: set.Logger, telemetry: tel, tracker: tracker}
	detach := func() {}
	if tracker != nil && emitsLogs {
		detach = tracker.attachLogs()
	}
	p.release = sync.OnceFunc(func() {
		detach()
		releaseShared()
		tb.Shutdown()
	})
	return p, nil
}

func (p *goldenProcessor) shutdown(context.Context) error {
	p.release()
	return nil
}

// addedToEveryRecord counts the attributes a record gains after its fields
// are normalized: golden.valid, the list of its failures (most records that
// fail have one list), and event.id, which reqidstitch adds next. Their room
// is made once, where appending one would double the record's attributes.
const addedToEveryRecord = 3

// process runs the attribute steps on one record, from normalization to
// validation: the steps logs and spans share.
func (p *goldenProcessor) process(r *recordView, signal string, at time.Time, sc *scratch, t *tally) {
	c := p.c
	r.attrs.EnsureCapacity(r.attrs.Len() + addedToEveryRecord)
	c.normalize(r.attrs, sc, t)
	hash := c.hashInput(r.attrs, sc) // before removeAttributes takes the raw input away
	c.removeAttributes(r.attrs, sc, t)
	c.putInputHash(r.attrs, hash, t) // into the room removeAttributes made
	// Drift sees canonical names: a version that renames request_id to
	// x_request_id has not lost anything.
	p.observeDrift(r, signal, at, sc, t)
	c.validator.check(r, sc)
}

// observeDrift counts a record's fields in its version's schema. Records that
// report an error stay out: a canary version whose requests all fail writes
// only error-path fields, which the version serving beside it does not lack.
func (p *goldenProcessor) observeDrift(r *recordView, signal string, at time.Time, sc *scratch, t *tally) {
	if p.tracker == nil || r.reportsError {
		return
	}
	ver, ok := r.attrs.Get(golden.ModelVer)
	if !ok || ver.Type() != pcommon.ValueTypeStr || ver.Str() == "" {
		return
	}
	stage, _ := r.attrs.Get(golden.Stage)
	key := lineageKey{signal: signal, service: serviceLabel(r.service), stage: stage.Str(), family: sc.families.get(ver.Str(), golden.ModelFamily)}
	evicted, event, mark := p.tracker.observe(key, ver.Str(), r.attrs, at)
	t.evicted += int64(evicted)
	if event != nil {
		t.drifts = append(t.drifts, event.key.service)
		p.logger.Info("Schema drift detected", zap.String("summary", event.summary()))
	}
	mark.apply(r.attrs)
}

// finish tags the record with its outcome, counts it and says whether to drop it.
func (p *goldenProcessor) finish(attrs pcommon.Map, sc *scratch, t *tally) (drop bool) {
	t.in++
	t.fail(sc.failures)
	if len(sc.failures) == 0 {
		t.valid++
	} else {
		t.invalid++
		if reason, ok := p.c.drop.match(sc.failures); ok {
			t.dropped[reason]++
			return true
		}
	}
	tag(attrs, sc.failures)
	return false
}

func (p *goldenProcessor) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	var sc scratch
	var t tally
	var r recordView // one per batch: it escapes to the validator's closures
	now := time.Now()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		service := serviceName(rl.Resource())
		p.c.redactAttributes(rl.Resource().Attributes(), false, targetResource, &t)
		valid, invalid := t.valid, t.invalid
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			p.c.redactAttributes(sl.Scope().Attributes(), false, targetScope, &t)
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				if lr.EventName() == golden.SchemaDriftEvent { // from an upstream goldenfield: not service data
					return false
				}
				sc.reset()
				r = recordView{
					attrs:     lr.Attributes(),
					service:   service,
					hasSpanID: !lr.SpanID().IsEmpty(),
					hasLevel:  lr.SeverityNumber() != plog.SeverityNumberUnspecified || lr.SeverityText() != "",
					hasEvent:  lr.EventName() != "",
				}
				p.c.extractBody(lr.Body(), r.attrs, &sc, &t)
				setSeverity(lr, &t)
				r.reportsError = lr.SeverityNumber() >= plog.SeverityNumberError
				p.process(&r, signalLogs, logTime(lr, now), &sc, &t)
				p.c.redactBody(lr.Body(), &sc, &t)
				if rules := p.c.validator.logRules; len(rules) > 0 {
					tCtx := ottllog.NewTransformContext(rl, sl, lr)
					evalRules(ctx, rules, tCtx, &sc, p.logger)
					tCtx.Close()
				}
				return p.finish(r.attrs, &sc, &t)
			})
		}
		sls.RemoveIf(func(sl plog.ScopeLogs) bool { return sl.LogRecords().Len() == 0 })
		p.telemetry.noise.add(serviceLabel(service), t.valid-valid, t.invalid-invalid)
	}
	rls.RemoveIf(func(rl plog.ResourceLogs) bool { return rl.ScopeLogs().Len() == 0 })
	if p.tracker != nil {
		for _, e := range p.tracker.drain() {
			e.appendTo(ld, now)
		}
	}
	p.telemetry.flush(ctx, &t)
	if rls.Len() == 0 {
		return ld, processorhelper.ErrSkipProcessingData
	}
	return ld, nil
}

func (p *goldenProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	var sc scratch
	var t tally
	var r recordView
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		service := serviceName(rs.Resource())
		p.c.redactAttributes(rs.Resource().Attributes(), false, targetResource, &t)
		valid, invalid := t.valid, t.invalid
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			p.c.redactAttributes(ss.Scope().Attributes(), false, targetScope, &t)
			ss.Spans().RemoveIf(func(span ptrace.Span) bool {
				sc.reset()
				r = recordView{
					attrs:        span.Attributes(),
					service:      service,
					hasSpanID:    !span.SpanID().IsEmpty(),
					hasEvent:     span.Name() != "",
					hasStatus:    span.Status().Code() != ptrace.StatusCodeUnset,
					reportsError: span.Status().Code() == ptrace.StatusCodeError,
				}
				p.process(&r, signalTraces, span.StartTimestamp().AsTime(), &sc, &t)
				p.c.redactSpan(span, &t)
				if rules := p.c.validator.spanRules; len(rules) > 0 {
					tCtx := ottlspan.NewTransformContext(rs, ss, span)
					evalRules(ctx, rules, tCtx, &sc, p.logger)
					tCtx.Close()
				}
				return p.finish(r.attrs, &sc, &t)
			})
		}
		sss.RemoveIf(func(ss ptrace.ScopeSpans) bool { return ss.Spans().Len() == 0 })
		p.telemetry.noise.add(serviceLabel(service), t.valid-valid, t.invalid-invalid)
	}
	rss.RemoveIf(func(rs ptrace.ResourceSpans) bool { return rs.ScopeSpans().Len() == 0 })
	p.telemetry.flush(ctx, &t)
	if rss.Len() == 0 {
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

// evalRules records a failure for each rule whose condition holds. A condition
// that cannot be evaluated on a record does not fail it; the error is logged at debug level.
func evalRules[K any](ctx context.Context, rules []rule[K], tCtx K, sc *scratch, logger *zap.Logger) {
	for _, r := range rules {
		broken, err := r.condition.Eval(ctx, tCtx)
		if err != nil {
			logger.Debug("Validation rule failed to evaluate", zap.String("rule", r.name), zap.Error(err))
			continue
		}
		if broken {
			sc.failures = append(sc.failures, failure{reasonRule, r.name})
		}
	}
}

// setSeverity gives a log record without a severity number the one its
// severity text or its body shows (failure model: TextSeverity), so that
// every later component, and every backend, sees an error written only as text.
func setSeverity(lr plog.LogRecord, t *tally) {
	if lr.SeverityNumber() != plog.SeverityNumberUnspecified {
		return
	}
	if n, ok := failmodel.LevelSeverity(lr.SeverityText()); ok {
		lr.SetSeverityNumber(n)
		t.severityParsed[fromSeverityText]++
		return
	}
	if lr.SeverityText() != "" {
		return
	}
	if n, ok := failmodel.BodySeverity(lr.Body()); ok {
		lr.SetSeverityNumber(n)
		lr.SetSeverityText(failmodel.SeverityText(n))
		t.severityParsed[fromBody]++
	}
}

func serviceName(res pcommon.Resource) string {
	if v, ok := res.Attributes().Get("service.name"); ok {
		return v.AsString()
	}
	return ""
}

// serviceLabel names a service in telemetry and drift records, as OpenTelemetry
// does when service.name is unset.
func serviceLabel(service string) string {
	return cmp.Or(service, "unknown_service")
}

func logTime(lr plog.LogRecord, now time.Time) time.Time {
	if ts := lr.Timestamp(); ts != 0 {
		return ts.AsTime()
	}
	if ts := lr.ObservedTimestamp(); ts != 0 {
		return ts.AsTime()
	}
	return now
}
