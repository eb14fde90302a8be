package failure

import (
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// logRecord returns a detector view of a fresh log record that set has filled in.
func logRecord(set func(plog.LogRecord)) *Record {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	sl := rl.ScopeLogs().AppendEmpty()
	lr := sl.LogRecords().AppendEmpty()
	set(lr)
	return &Record{Attrs: lr.Attributes(), ResourceLogs: rl, ScopeLogs: sl, LogRecord: lr}
}

// span returns a detector view of a fresh span that set has filled in.
func span(set func(ptrace.Span)) *Record {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ss := rs.ScopeSpans().AppendEmpty()
	s := ss.Spans().AppendEmpty()
	set(s)
	return &Record{Attrs: s.Attributes(), IsSpan: true, ResourceSpans: rs, ScopeSpans: ss, Span: s}
}
