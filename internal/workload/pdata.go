package workload

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ToPdata builds the OTLP data that Run's SDK exporters would send for reqs,
// without the SDK: one resource per service instance, spans and logs apart,
// a request's Late records after its other logs. Components' tests and
// benchmarks feed it to their consumers directly.
func ToPdata(reqs []*Request) (ptrace.Traces, plog.Logs) {
	td, ld := ptrace.NewTraces(), plog.NewLogs()
	spanSlices := map[*Service]ptrace.SpanSlice{}
	logSlices := map[*Service]plog.LogRecordSlice{}
	putLogs := func(logs []Log) {
		for i := range logs {
			l := &logs[i]
			records, ok := logSlices[l.Service]
			if !ok {
				rl := ld.ResourceLogs().AppendEmpty()
				PutResource(l.Service, rl.Resource())
				sl := rl.ScopeLogs().AppendEmpty()
				sl.Scope().SetName(ScopeName)
				records = sl.LogRecords()
				logSlices[l.Service] = records
			}
			PutLog(l, records.AppendEmpty())
		}
	}
	for _, r := range reqs {
		for i := range r.Spans {
			s := &r.Spans[i]
			spans, ok := spanSlices[s.Service]
			if !ok {
				rs := td.ResourceSpans().AppendEmpty()
				PutResource(s.Service, rs.Resource())
				ss := rs.ScopeSpans().AppendEmpty()
				ss.Scope().SetName(ScopeName)
				spans = ss.Spans()
				spanSlices[s.Service] = spans
			}
			PutSpan(s, spans.AppendEmpty())
		}
		putLogs(r.Logs)
		putLogs(r.Late)
	}
	return td, ld
}

// PutResource writes a service instance's resource attributes, as the SDK does.
func PutResource(svc *Service, res pcommon.Resource) {
	a := res.Attributes()
	a.PutStr(string(semconv.ServiceNameKey), svc.Name)
	a.PutStr(string(semconv.ServiceInstanceIDKey), svc.Instance)
	a.PutStr(string(semconv.ServiceVersionKey), svc.Version)
	a.PutStr(string(semconv.HostNameKey), svc.Host)
	if svc.PID != 0 {
		a.PutInt(string(semconv.ProcessPIDKey), int64(svc.PID))
	}
	a.PutStr(string(semconv.TelemetrySDKLanguageKey), svc.Language)
}

// PutSpan writes a modelled span.
func PutSpan(s *Span, out ptrace.Span) {
	out.SetName(s.Name)
	out.SetKind(ptrace.SpanKind(s.Kind))
	out.SetTraceID(pcommon.TraceID(s.Context.TraceID()))
	out.SetSpanID(pcommon.SpanID(s.Context.SpanID()))
	if s.Parent.IsValid() {
		out.SetParentSpanID(pcommon.SpanID(s.Parent.SpanID()))
	}
	out.SetStartTimestamp(pcommon.NewTimestampFromTime(s.Start))
	out.SetEndTimestamp(pcommon.NewTimestampFromTime(s.End))
	if s.Error != "" {
		out.Status().SetCode(ptrace.StatusCodeError)
		out.Status().SetMessage(s.Error)
	}
	for _, link := range s.Links {
		l := out.Links().AppendEmpty()
		l.SetTraceID(pcommon.TraceID(link.TraceID()))
		l.SetSpanID(pcommon.SpanID(link.SpanID()))
	}
	for _, ev := range s.Events {
		e := out.Events().AppendEmpty()
		e.SetName(ev.Name)
		e.SetTimestamp(pcommon.NewTimestampFromTime(ev.Time))
		PutAttributes(e.Attributes(), ev.Attrs)
	}
	PutAttributes(out.Attributes(), s.Attrs)
}

// PutLog writes a modelled log record.
func PutLog(l *Log, out plog.LogRecord) {
	out.SetTimestamp(pcommon.NewTimestampFromTime(l.Time))
	out.SetObservedTimestamp(pcommon.NewTimestampFromTime(l.Time))
	out.SetSeverityNumber(plog.SeverityNumber(l.Severity))
	out.SetSeverityText(l.SeverityText)
	out.Body().SetStr(l.Body)
	if l.Context.IsValid() {
		out.SetTraceID(pcommon.TraceID(l.Context.TraceID()))
		out.SetSpanID(pcommon.SpanID(l.Context.SpanID()))
	}
	PutAttributes(out.Attributes(), l.Attrs)
}

// PutAttributes writes SDK attributes into a pdata map.
func PutAttributes(m pcommon.Map, kvs []attribute.KeyValue) {
	m.EnsureCapacity(m.Len() + len(kvs))
	for _, kv := range kvs {
		k := string(kv.Key)
		switch kv.Value.Type() {
		case attribute.BOOL:
			m.PutBool(k, kv.Value.AsBool())
		case attribute.INT64:
			m.PutInt(k, kv.Value.AsInt64())
		case attribute.FLOAT64:
			m.PutDouble(k, kv.Value.AsFloat64())
		default:
			m.PutStr(k, kv.Value.String())
		}
	}
}
