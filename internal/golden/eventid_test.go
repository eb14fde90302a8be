package golden

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func testLog() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "model")
	rl.Resource().Attributes().PutStr("host.name", "gpu-node-0")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("engine")
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(1715234890123000000)
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	lr.Body().SetStr("forward done")
	lr.Attributes().PutStr(ReqID, "req-1715234890123-a1b2c3")
	return ld
}

func logHash(ld plog.Logs) EventHash {
	rl := ld.ResourceLogs().At(0)
	sl := rl.ScopeLogs().At(0)
	return LogEventHash(rl.Resource(), sl.Scope(), sl.LogRecords().At(0))
}

func TestLogEventHashIsIdentity(t *testing.T) {
	base := logHash(testLog())
	if again := logHash(testLog()); again != base {
		t.Fatalf("same record hashed %s then %s", base, again)
	}

	// Attributes are not identity: processors add them on the way.
	ld := testLog()
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutStr(EventID, "x")
	ld.ResourceLogs().At(0).Resource().Attributes().PutStr("k8s.pod.name", "p")
	if got := logHash(ld); got != base {
		t.Errorf("attributes changed the identity: %s, want %s", got, base)
	}

	changes := map[string]func(plog.Logs){
		"body":     func(ld plog.Logs) { first(ld).Body().SetStr("forward done!") },
		"time":     func(ld plog.Logs) { first(ld).SetTimestamp(1715234890123000001) },
		"severity": func(ld plog.Logs) { first(ld).SetSeverityNumber(plog.SeverityNumberWarn) },
		"trace":    func(ld plog.Logs) { first(ld).SetTraceID(pcommon.TraceID{1}) },
		"span":     func(ld plog.Logs) { first(ld).SetSpanID(pcommon.SpanID{1}) },
		"service":  func(ld plog.Logs) { ld.ResourceLogs().At(0).Resource().Attributes().PutStr("service.name", "gateway") },
		"host":     func(ld plog.Logs) { ld.ResourceLogs().At(0).Resource().Attributes().PutStr("host.name", "gpu-node-1") },
		"scope":    func(ld plog.Logs) { ld.ResourceLogs().At(0).ScopeLogs().At(0).Scope().SetName("other") },
		// Two requests logging the same line at the same time are two events.
		"req_id":    func(ld plog.Logs) { first(ld).Attributes().PutStr(ReqID, "req-1715234890123-d4e5f6") },
		"no req_id": func(ld plog.Logs) { first(ld).Attributes().Remove(ReqID) },
		"body type": func(ld plog.Logs) {
			first(ld).Body().SetEmptyMap().PutStr("forward", "done")
		},
		// Field boundaries are part of the identity: moving text between fields changes it.
		"boundary": func(ld plog.Logs) {
			ld.ResourceLogs().At(0).Resource().Attributes().PutStr("host.name", "gpu-node-0engine")
			ld.ResourceLogs().At(0).ScopeLogs().At(0).Scope().SetName("")
		},
	}
	for name, change := range changes {
		ld := testLog()
		change(ld)
		if got := logHash(ld); got == base {
			t.Errorf("changing the %s kept the identity %s", name, got)
		}
	}
}

func first(ld plog.Logs) plog.LogRecord {
	return ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
}

func TestLogEventHashFallsBackToObservedTime(t *testing.T) {
	a, b := testLog(), testLog()
	first(a).SetTimestamp(0)
	first(a).SetObservedTimestamp(5)
	first(b).SetTimestamp(0)
	first(b).SetObservedTimestamp(6)
	if logHash(a) == logHash(b) {
		t.Error("records without a timestamp that were observed at different times share an identity")
	}
}

func TestSpanEventHash(t *testing.T) {
	span := func(name string) EventHash {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "gateway")
		ss := rs.ScopeSpans().AppendEmpty()
		s := ss.Spans().AppendEmpty()
		s.SetName(name)
		s.SetTraceID(pcommon.TraceID{1, 2})
		s.SetSpanID(pcommon.SpanID{3})
		s.SetStartTimestamp(10)
		s.Attributes().PutStr(ReqID, name)
		return SpanEventHash(rs.Resource(), ss.Scope(), s)
	}
	if first, again := span("POST /v1/chat"), span("POST /v1/chat"); first != again {
		t.Error("same span hashed differently")
	}
	if span("POST /v1/chat") == span("GET /v1/chat") {
		t.Error("spans with different names share an identity")
	}
}

func TestParseEventHash(t *testing.T) {
	h := logHash(testLog())
	s := h.String()
	if len(s) != 32 || strings.ToLower(s) != s {
		t.Fatalf("String() = %q, want 32 lowercase hex digits", s)
	}
	if got, ok := ParseEventHash(s); !ok || got != h {
		t.Errorf("ParseEventHash(%q) = %s, %v", s, got, ok)
	}
	for _, bad := range []string{"", s[:31], s + "0", strings.ToUpper(s), "g" + s[1:], "\xff" + s[1:]} {
		if _, ok := ParseEventHash(bad); ok {
			t.Errorf("ParseEventHash(%q) accepted", bad)
		}
	}
}

func FuzzParseEventHash(f *testing.F) {
	f.Add("0123456789abcdef0123456789abcdef")
	f.Add("0123456789ABCDEF0123456789ABCDEF")
	f.Add("")
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		h, ok := ParseEventHash(s)
		if ok && h.String() != s {
			t.Fatalf("ParseEventHash(%q) accepted a value that does not round-trip (%s)", s, h)
		}
	})
}
