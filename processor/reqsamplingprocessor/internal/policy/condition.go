package policy

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

// FailureCondition matches requests with a record for which any of its OTTL
// conditions holds: failures that only a configured condition recognizes
// (an empty output, a filtered answer). A condition applies to the signals
// whose OTTL context (log, span) parses it.
type FailureCondition struct {
	recordPolicy
	logs  []*ottl.Condition[*ottllog.TransformContext]
	spans []*ottl.Condition[*ottlspan.TransformContext]
	// evalFailed is called when a condition cannot be evaluated on a record
	// (it then does not match).
	evalFailed func(error)
}

var _ Evaluator = (*FailureCondition)(nil)

// NewFailureCondition parses conditions; errors name the condition's index.
func NewFailureCondition(conditions []string, set component.TelemetrySettings, evalFailed func(error)) (*FailureCondition, error) {
	logParser, err := ottllog.NewParser(ottlfuncs.StandardConverters[*ottllog.TransformContext](), set)
	if err != nil {
		return nil, err
	}
	spanParser, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set)
	if err != nil {
		return nil, err
	}
	f := &FailureCondition{evalFailed: evalFailed}
	var errs []error
	for i, text := range conditions {
		if strings.TrimSpace(text) == "" {
			errs = append(errs, fmt.Errorf("[%d]: empty; write an OTTL condition that is true on a failing record", i))
			continue
		}
		logCond, logErr := logParser.ParseCondition(text)
		spanCond, spanErr := spanParser.ParseCondition(text)
		if logErr != nil && spanErr != nil {
			errs = append(errs, fmt.Errorf("[%d]: neither the log nor the span context parses %q: %w", i, text, errors.Join(logErr, spanErr)))
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

func (f *FailureCondition) MatchRecord(r *Record) bool {
	ctx := context.Background()
	if r.IsSpan {
		if len(f.spans) == 0 {
			return false
		}
		tCtx := ottlspan.NewTransformContext(r.ResourceSpans, r.ScopeSpans, r.Span)
		defer tCtx.Close()
		return anyHolds(ctx, f.spans, tCtx, f.evalFailed)
	}
	if len(f.logs) == 0 {
		return false
	}
	tCtx := ottllog.NewTransformContext(r.ResourceLogs, r.ScopeLogs, r.LogRecord)
	defer tCtx.Close()
	return anyHolds(ctx, f.logs, tCtx, f.evalFailed)
}

func anyHolds[K any](ctx context.Context, conditions []*ottl.Condition[K], tCtx K, evalFailed func(error)) bool {
	for _, c := range conditions {
		ok, err := c.Eval(ctx, tCtx)
		if err != nil {
			evalFailed(fmt.Errorf("condition %q: %w", c.String(), err))
			continue
		}
		if ok {
			return true
		}
	}
	return false
}
