package failure

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Record is one log record or span as the detectors see it. Attrs, Service,
// Stage and Model are set for both signals; the parts of the other signal are
// left empty.
type Record struct {
	Attrs pcommon.Map
	// Service is the resource's service.name, Stage and Model the record's
	// stage and model_ver attributes ("" when absent).
	Service, Stage, Model string
	// Invalid is true when the record failed golden-field validation.
	Invalid bool

	IsSpan bool

	ResourceLogs plog.ResourceLogs
	ScopeLogs    plog.ScopeLogs
	LogRecord    plog.LogRecord

	ResourceSpans ptrace.ResourceSpans
	ScopeSpans    ptrace.ScopeSpans
	Span          ptrace.Span
}

// scopeName is the record's instrumentation scope name.
func (r *Record) scopeName() string {
	if r.IsSpan {
		return r.ScopeSpans.Scope().Name()
	}
	return r.ScopeLogs.Scope().Name()
}
