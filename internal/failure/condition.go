package failure

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
)

// Conditions finds the records for which one of its OTTL conditions holds:
// failures that only a configured condition recognizes (a rule of the
// service's own contract). A condition applies to the signals whose OTTL
// context (log, span) parses it.
type Conditions struct {
	logs  []*ottl.Condition[*ottllog.TransformContext]
	spans []*ottl.Condition[*ottlspan.TransformContext]
	// evalFailed is called when a condition cannot be evaluated on a record
	// (it then does not match).
	evalFailed func(error)
}

// NewConditions parses conditions; errors name the condition's index.
func NewConditions(conditions []string, set component.TelemetrySettings, evalFailed func(error)) (*Conditions, error) {
	logParser, err := ottllog.NewParser(ottlfuncs.StandardConverters[*ottllog.TransformContext](), set)
	if err != nil {
		return nil, err
	}
	spanParser, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set)
	if err != nil {
		return nil, err
	}
	f := &Conditions{evalFailed: evalFailed}
	var errs []error
	for i, text := range conditions {
		if strings.TrimSpace(text) == "" {
			errs = append(errs, fmt.Errorf("::%d: empty; write an OTTL condition that is true on a failing record", i))
			continue
		}
		logCond, logErr := logParser.ParseCondition(text)
		spanCond, spanErr := spanParser.ParseCondition(text)
		if logErr != nil && spanErr != nil {
			errs = append(errs, fmt.Errorf("::%d: neither the log nor the span context parses %q: %w", i, text, errors.Join(logErr, spanErr)))
			continue
		}
		if logErr == nil {
			f.logs = append(f.logs, logCond)
		}
		if spanErr == nil {
			f.spans = append(f.spans, spanCond)
		}
	}
	if len(conditions) == 0 {
		errs = append(errs, errors.New("no conditions; list at least one OTTL condition"))
	}
	return f, errors.Join(errs...)
}

// Check returns the first condition that holds on r.
func (f *Conditions) Check(r *Record) (Reason, bool) {
	ctx := context.Background()
	var held string
	if r.IsSpan {
		if len(f.spans) == 0 {
			return Reason{}, false
		}
		tCtx := ottlspan.NewTransformContext(r.ResourceSpans, r.ScopeSpans, r.Span)
		defer tCtx.Close()
		held = firstHolding(ctx, f.spans, tCtx, f.evalFailed)
	} else {
		if len(f.logs) == 0 {
			return Reason{}, false
		}
		tCtx := ottllog.NewTransformContext(r.ResourceLogs, r.ScopeLogs, r.LogRecord)
		defer tCtx.Close()
		held = firstHolding(ctx, f.logs, tCtx, f.evalFailed)
	}
	if held == "" {
		return Reason{}, false
	}
	return Reason{Kind: KindCondition, Service: r.Service, Stage: r.Stage, Value: held}, true
}

// firstHolding returns the text of the first condition that holds; "" when none does.
func firstHolding[K any](ctx context.Context, conditions []*ottl.Condition[K], tCtx K, evalFailed func(error)) string {
	for _, c := range conditions {
		ok, err := c.Eval(ctx, tCtx)
		if err != nil {
			evalFailed(fmt.Errorf("condition %q: %w", c.String(), err))
			continue
		}
		if ok {
			return c.String()
		}
	}
	return ""
}
