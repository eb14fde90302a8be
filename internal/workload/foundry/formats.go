package foundry

import (
	"strconv"
	"strings"
	"time"
)

// text builds one log body in a reused buffer, in the formats the platform's
// logging libraries print. Values are ASCII without control characters, for
// which strconv's quoting is also valid JSON.
type text struct{ b []byte }

func (t *text) reset() *text { t.b = t.b[:0]; return t }

func (t *text) String() string { return string(t.b) }

func (t *text) s(s string) *text { t.b = append(t.b, s...); return t }

func (t *text) i(n int64) *text { t.b = strconv.AppendInt(t.b, n, 10); return t }

func (t *text) f(f float64, prec int) *text {
	t.b = strconv.AppendFloat(t.b, f, 'f', prec, 64)
	return t
}

func (t *text) time(at time.Time, layout string) *text {
	t.b = at.UTC().AppendFormat(t.b, layout)
	return t
}

// Python logging's default format: "2026-01-02 15:04:05,123 - name - LEVEL - msg".
func (t *text) python(at time.Time, logger, level string) *text {
	return t.reset().time(at, "2006-01-02 15:04:05,000").s(" - ").s(logger).s(" - ").s(level).s(" - ")
}

// log4j's "%d [%t] %-5level %logger{36} - %msg".
func (t *text) log4j(at time.Time, thread, level, logger string) *text {
	t.reset().time(at, "2006-01-02 15:04:05.000").s(" [").s(thread).s("] ").s(level)
	for range 5 - len(level) {
		t.s(" ")
	}
	return t.s(" ").s(logger).s(" - ")
}

// Go log/slog's TextHandler: "time=… level=INFO msg=…", then kv pairs.
func (t *text) slogText(at time.Time, level, msg string) *text {
	t.reset().s("time=").time(at, rfc3339Millis).s(" level=").s(level)
	return t.kv("msg", msg)
}

// Go log/slog's JSONHandler: {"time":…,"level":"INFO","msg":…, then members; close with end.
func (t *text) slogJSON(at time.Time, level, msg string) *text {
	t.reset().s(`{"time":"`).time(at, time.RFC3339Nano).s(`"`)
	return t.str("level", level).str("msg", msg)
}

// structlog's JSONRenderer: {"event":…,"level":"info","timestamp":…, then members; close with end.
func (t *text) structlog(at time.Time, level, event string) *text {
	t.reset().s(`{"event":`)
	t.b = strconv.AppendQuote(t.b, event)
	t.str("level", level)
	t.b = append(t.b, `,"timestamp":"`...)
	return t.time(at, rfc3339Micros).s(`"`)
}

// logfmt with lvl=: "lvl=info msg=…", then kv pairs.
func (t *text) logfmt(level, msg string) *text { return t.reset().s("lvl=").s(level).kv("msg", msg) }

const (
	rfc3339Millis = "2006-01-02T15:04:05.000Z07:00"
	rfc3339Micros = "2006-01-02T15:04:05.000000Z07:00"
)

// JSON members, after an object's first member.

func (t *text) key(k string) *text {
	t.b = append(t.b, ',')
	t.b = strconv.AppendQuote(t.b, k)
	t.b = append(t.b, ':')
	return t
}

func (t *text) str(k, v string) *text {
	t.key(k)
	t.b = strconv.AppendQuote(t.b, v)
	return t
}

func (t *text) num(k string, n int64) *text { return t.key(k).i(n) }

func (t *text) float(k string, f float64, prec int) *text { return t.key(k).f(f, prec) }

func (t *text) end() *text { return t.s("}") }

// kv pairs, quoted the way slog's TextHandler quotes them.

func (t *text) kv(k, v string) *text {
	t.b = append(t.b, ' ')
	t.b = append(t.b, k...)
	t.b = append(t.b, '=')
	if v == "" || strings.ContainsAny(v, " =\"") {
		t.b = strconv.AppendQuote(t.b, v)
	} else {
		t.b = append(t.b, v...)
	}
	return t
}

func (t *text) kvi(k string, n int64) *text { return t.s(" ").s(k).s("=").i(n) }
