package failure

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/plog"
)

func TestTextSeverity(t *testing.T) {
	const (
		none  = plog.SeverityNumberUnspecified
		info  = plog.SeverityNumberInfo
		warn  = plog.SeverityNumberWarn
		err   = plog.SeverityNumberError
		fatal = plog.SeverityNumberFatal
	)
	for line, want := range map[string]plog.SeverityNumber{
		// Leading level words, as printf-style loggers write them.
		"ERROR write to shard failed: read-only":        err,
		"INFO model: model forward completed for req-1": info,
		"WARN slow upstream":                            warn,
		"[error] upstream timed out":                    err,
		"FATAL: out of file descriptors":                fatal,
		"error: connection refused":                     err,
		// Python logging: the default format and a common custom one.
		"ERROR:root:decode step failed":                                           err,
		"2024-05-01 12:00:00,123 - kilnserve.engine - ERROR - decode step failed": err,
		"2024-05-01 12:00:00,123 WARNING lexd.pool worker pool saturated":         warn,
		"CRITICAL:app:gave up":                                                    fatal,
		// log4j / logback, with the thread in brackets.
		"2024-05-01 12:00:00.123 ERROR [main] c.e.Store - write failed": err,
		"12:00:00.123 [pool-1-thread-3] WARN  c.e.Store - retrying":     warn,
		"SEVERE: persistence failed":                                    err,
		// slog and logrus text, logfmt.
		"time=2024-05-01T12:00:00Z level=ERROR msg=\"generation failed\" err=oom": err,
		"ts=1715234890 lvl=warn msg=retry":                                        warn,
		"level=info msg=done":                                                     info,
		// JSON: structlog, zap, bunyan's numbers.
		`{"event":"request aborted","level":"error","ts":1}`: err,
		`{"msg":"ok","level":"info"}`:                        info,
		`{"severity":"WARNING","message":"slow"}`:            warn,
		`{"level":50,"msg":"failed"}`:                        err,
		`{"levelname": "CRITICAL", "msg": "x"}`:              fatal,
		// glog / klog.
		"E0501 12:00:00.123456    1234 store.go:88] write failed": err,
		"I0501 12:00:00.123456    1234 store.go:88] ok":           info,
		// Stack traces and panics anywhere in the first lines.
		"decode step failed for req-1\nTraceback (most recent call last):\n  File \"x.py\"":  err,
		"INFO retrying\nTraceback (most recent call last):\n":                                err,
		"java.lang.IllegalStateException: closed\n\tat com.example.Store.put(Store.java:42)": err,
		"panic: runtime error: index out of range\n\ngoroutine 1 [running]:":                 fatal,
		// Prose is not a level: the prefix ends at the first plain word.
		"request completed, no error":        none,
		"Retrying after Error from upstream": none,
		"user typed ERROR in the search box": none,
		"the errorless path":                 none,
		"":                                   none,
		"{not json at all level":             none,
		`{"message":"error in user input"}`:  none,
		"levels=error":                       none,
		"Error handling is fine here":        none,
	} {
		got, ok := TextSeverity(line)
		assert.Equal(t, want, got, "%q", line)
		assert.Equal(t, want != none, ok, "%q", line)
	}
}

func TestLevelSeverity(t *testing.T) {
	for name, want := range map[string]plog.SeverityNumber{
		"warning": plog.SeverityNumberWarn, "Err": plog.SeverityNumberError, "crit": plog.SeverityNumberFatal,
		"notice": plog.SeverityNumberInfo, "finest": plog.SeverityNumberTrace,
	} {
		got, ok := LevelSeverity(name)
		assert.True(t, ok, name)
		assert.Equal(t, want, got, name)
	}
	for _, name := range []string{"", "verbose!", "errorsomething"} {
		_, ok := LevelSeverity(name)
		assert.False(t, ok, name)
	}
}

func TestSeverityOfRecord(t *testing.T) {
	severity := func(lr plog.LogRecord) plog.SeverityNumber { n, _ := severityOf(lr); return n }
	lr := plog.NewLogRecord()
	lr.Body().SetStr("ERROR boom")
	assert.Equal(t, plog.SeverityNumberError, severity(lr), "from the body")
	lr.SetSeverityText("info")
	assert.Equal(t, plog.SeverityNumberInfo, severity(lr), "the severity text wins over the body")
	lr.SetSeverityNumber(plog.SeverityNumberWarn)
	assert.Equal(t, plog.SeverityNumberWarn, severity(lr), "the number wins")
	m := plog.NewLogRecord()
	m.Body().SetEmptyMap().PutStr("level", "fatal")
	assert.Equal(t, plog.SeverityNumberFatal, severity(m), "a map body's level field")
}

func FuzzTextSeverity(f *testing.F) {
	for _, s := range []string{"ERROR x", `{"level":"error"}`, "level=warn", "E0501 x", "Traceback (most recent call last):",
		"2024-05-01 12:00:00,123 - a.b - ERROR - c", `{"level":`, `{"level":"`, "lvl=", "\xff\xfe ERROR"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := TextSeverity(s)
		if ok != (n != plog.SeverityNumberUnspecified) {
			t.Fatalf("%q: ok=%v with severity %v", s, ok, n)
		}
		if ok && SeverityText(n) == "" {
			t.Fatalf("%q: severity %v has no text", s, n)
		}
		_ = utf8.ValidString(s)
	})
}
