package failure

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/extract"
	"github.com/loom-otel/loom/internal/golden"
)

// DefaultErrorAttributes are the attributes that report an error by their
// presence with a value that says something failed: the OpenTelemetry
// semantic conventions' error.type and exception.type, and the spellings
// services commonly log.
var DefaultErrorAttributes = []string{"error.type", "exception.type", "error_type", "error_code", "error.code", "error"}

// Explicit finds the failures a record reports itself: a span with status
// error or an exception event, a log record at or above MinSeverity (from its
// number, its severity text or its body), an error attribute with a value that
// says something failed, a status code or finish reason that the OpenTelemetry
// semantic conventions define as a failure (conventions.go), the gpu
// receiver's failure records, and goldenfield's mark on a record of a
// model_ver that lost fields (schema drift).
type Explicit struct {
	minSeverity plog.SeverityNumber
	attributes  []string
	// conventions applies the semantic conventions' table; failureFinishReasons
	// are the GenAI finish reasons it reads as failures.
	conventions          bool
	failureFinishReasons []string
}

// ExplicitConfig configures Explicit. Its zero value is the default.
type ExplicitConfig struct {
	// MinSeverity is the lowest log severity that reports an error; 0 means error.
	MinSeverity plog.SeverityNumber
	// Attributes report an error by a value that says something failed; nil
	// means DefaultErrorAttributes.
	Attributes []string
	// IgnoreConventions turns the semantic conventions' table off.
	IgnoreConventions bool
	// FailureFinishReasons are the gen_ai.response.finish_reasons values that
	// report a failure; nil means DefaultFailureFinishReasons.
	FailureFinishReasons []string
}

// NewExplicit returns the detector.
func NewExplicit(cfg ExplicitConfig) *Explicit {
	e := &Explicit{minSeverity: cfg.MinSeverity, attributes: cfg.Attributes,
		conventions: !cfg.IgnoreConventions, failureFinishReasons: cfg.FailureFinishReasons}
	if e.minSeverity == plog.SeverityNumberUnspecified {
		e.minSeverity = plog.SeverityNumberError
	}
	if e.attributes == nil {
		e.attributes = DefaultErrorAttributes
	}
	if e.failureFinishReasons == nil {
		e.failureFinishReasons = DefaultFailureFinishReasons
	}
	return e
}

// Check returns the first failure r reports.
func (e *Explicit) Check(r *Record) (Reason, bool) {
	at := Reason{Service: r.Service, Stage: r.Stage}
	if r.IsSpan {
		if r.Span.Status().Code() == ptrace.StatusCodeError {
			at.Kind, at.Value = KindStatus, r.Span.Status().Message()
			return at, true
		}
		events := r.Span.Events()
		for i := 0; i < events.Len(); i++ {
			if isExceptionEvent(events.At(i).Name()) {
				at.Kind = KindException
				if t, ok := events.At(i).Attributes().Get("exception.type"); ok {
					at.Attribute, at.Value = "exception.type", t.AsString()
				}
				return at, true
			}
		}
	} else if kind, ok := e.severity(r.LogRecord); ok {
		at.Kind = kind
		if r.scopeName() == golden.GPUEventScope {
			at.Kind, at.Value = KindGPU, r.LogRecord.EventName()
		}
		return at, true
	} else if e.conventions && isExceptionEvent(r.LogRecord.EventName()) {
		at.Kind = KindException
		if t, ok := r.Attrs.Get("exception.type"); ok {
			at.Attribute, at.Value = "exception.type", t.AsString()
		}
		return at, true
	}
	if e.conventions {
		if reason, ok := e.conventionFailure(r, at); ok {
			return reason, true
		}
	}
	for _, name := range e.attributes {
		if v, ok := r.Attrs.Get(name); ok && reportsFailure(v) {
			at.Kind, at.Attribute, at.Value = KindAttribute, name, extract.TruncateUTF8(v.AsString(), 128)
			return at, true
		}
	}
	if lost, ok := r.Attrs.Get(golden.DriftFieldsLost); ok && lost.Type() == pcommon.ValueTypeSlice && lost.Slice().Len() > 0 {
		names := make([]string, lost.Slice().Len())
		for i := range names {
			names[i] = lost.Slice().At(i).AsString()
		}
		at.Kind, at.Attribute = KindSchemaDrift, extract.TruncateUTF8(strings.Join(names, ","), 128)
		if old, ok := r.Attrs.Get(golden.DriftOldModelVer); ok {
			at.Value = extract.TruncateUTF8(old.AsString(), 128)
		}
		return at, true
	}
	return Reason{}, false
}

// severity says whether the log record is at or above the minimum severity,
// and whether its number or text, or only its body, says so.
func (e *Explicit) severity(lr plog.LogRecord) (Kind, bool) {
	n, fromBody := severityOf(lr)
	if fromBody {
		return KindText, n >= e.minSeverity
	}
	return KindSeverity, n >= e.minSeverity
}

// reportsFailure says whether an error attribute's value reports one: an
// empty string, false, zero, "0", "none", "ok" or an empty list do not
// (error_code=0 is success).
func reportsFailure(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		switch v.Str() {
		case "", "0", "none", "None", "null", "ok", "OK", "false", "nil":
			return false
		}
		return true
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeInt:
		return v.Int() != 0
	case pcommon.ValueTypeDouble:
		return v.Double() != 0
	case pcommon.ValueTypeSlice:
		return v.Slice().Len() > 0
	case pcommon.ValueTypeMap:
		return v.Map().Len() > 0
	case pcommon.ValueTypeBytes:
		return v.Bytes().Len() > 0
	}
	return false
}
