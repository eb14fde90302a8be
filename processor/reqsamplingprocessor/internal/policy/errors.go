package policy

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Errors matches requests with a record that reports a failure: a span with
// status error, a log record at or above a severity, or a record carrying one
// of the error attributes with a value that says something failed.
type Errors struct {
	recordPolicy
	minSeverity plog.SeverityNumber
	attributes  []string
}

var _ Evaluator = (*Errors)(nil)

// NewErrors returns the errors policy.
func NewErrors(minSeverity plog.SeverityNumber, attributes []string) *Errors {
	return &Errors{minSeverity: minSeverity, attributes: attributes}
}

func (e *Errors) MatchRecord(r *Record) bool {
	if r.IsSpan {
		if r.Span.Status().Code() == ptrace.StatusCodeError {
			return true
		}
	} else if severity(r.LogRecord) >= e.minSeverity {
		return true
	}
	for _, name := range e.attributes {
		if v, ok := r.Attrs.Get(name); ok && reportsFailure(v) {
			return true
		}
	}
	return false
}

// severity is the record's severity number, read from its severity text
// when the number is unset (logs collected from files often have only text).
func severity(lr plog.LogRecord) plog.SeverityNumber {
	if n := lr.SeverityNumber(); n != plog.SeverityNumberUnspecified {
		return n
	}
	text := strings.ToUpper(lr.SeverityText())
	for _, level := range severityTexts {
		if strings.HasPrefix(text, level.prefix) {
			return level.number
		}
	}
	return plog.SeverityNumberUnspecified
}

var severityTexts = []struct {
	prefix string
	number plog.SeverityNumber
}{
	{"FATAL", plog.SeverityNumberFatal}, {"CRIT", plog.SeverityNumberFatal}, {"EMERG", plog.SeverityNumberFatal},
	{"ALERT", plog.SeverityNumberFatal}, {"PANIC", plog.SeverityNumberFatal}, {"ERR", plog.SeverityNumberError},
	{"WARN", plog.SeverityNumberWarn}, {"INFO", plog.SeverityNumberInfo}, {"DEBUG", plog.SeverityNumberDebug},
	{"TRACE", plog.SeverityNumberTrace},
}

// ParseSeverity parses a severity name (trace, debug, info, warn, error,
// fatal; any case) into the lowest severity number of that level.
func ParseSeverity(name string) (plog.SeverityNumber, bool) {
	switch strings.ToLower(name) {
	case "trace":
		return plog.SeverityNumberTrace, true
	case "debug":
		return plog.SeverityNumberDebug, true
	case "info":
		return plog.SeverityNumberInfo, true
	case "warn":
		return plog.SeverityNumberWarn, true
	case "error":
		return plog.SeverityNumberError, true
	case "fatal":
		return plog.SeverityNumberFatal, true
	}
	return 0, false
}

// reportsFailure says whether an error attribute's value reports one: an
// empty string, false, zero or an empty list do not (error_code=0 is success).
func reportsFailure(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str() != ""
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
