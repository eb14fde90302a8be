package foundry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var formatTime = time.Date(2026, 3, 4, 5, 6, 7, 89123456, time.UTC)

// TestSlogFormats: the Go services' lines are what log/slog's own handlers print.
func TestSlogFormats(t *testing.T) {
	var tx text
	for name, c := range map[string]struct {
		handler func(*bytes.Buffer) slog.Handler
		ours    string
	}{
		"text": {func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
			tx.slogText(formatTime, "WARN", "tokenizer call failed, retrying").kv("x-request-id", "req-1").kvi("attempt", 1).kv("err", "a b").String()},
		"json": {func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
			tx.slogJSON(formatTime, "WARN", "tokenizer call failed, retrying").str("x-request-id", "req-1").num("attempt", 1).str("err", "a b").end().String()},
	} {
		var b bytes.Buffer
		r := slog.NewRecord(formatTime, slog.LevelWarn, "tokenizer call failed, retrying", 0)
		r.AddAttrs(slog.String("x-request-id", "req-1"), slog.Int("attempt", 1), slog.String("err", "a b"))
		if err := c.handler(&b).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSuffix(b.String(), "\n"); c.ours != want {
			t.Errorf("slog %s:\n got %s\nwant %s", name, c.ours, want)
		}
	}
}

// TestFormats pins the other formats: Python logging's default format,
// log4j's pattern, structlog's JSON renderer and logfmt with lvl=.
func TestFormats(t *testing.T) {
	var tx text
	for got, want := range map[string]string{
		tx.python(formatTime, "lexd.pool", "WARNING").s("worker pool saturated").String():                                                          "2026-03-04 05:06:07,089 - lexd.pool - WARNING - worker pool saturated",
		tx.log4j(formatTime, "grpc-exec-4", "WARN", "c.f.aegis.RuleCache").s("[req-1] refresh failed").String():                                    "2026-03-04 05:06:07.089 [grpc-exec-4] WARN  c.f.aegis.RuleCache - [req-1] refresh failed",
		tx.log4j(formatTime, "main", "ERROR", "c.f.X").s("m").String():                                                                             "2026-03-04 05:06:07.089 [main] ERROR c.f.X - m",
		tx.logfmt("info", "lookup done").kv("index", "kb-main").kvi("hits", 6).kv("q", "").String():                                                `lvl=info msg="lookup done" index=kb-main hits=6 q=""`,
		tx.structlog(formatTime, "error", "request aborted").num("kv.preemptions", 18).float("kv_usage", 0.4149, 2).str("s", `a"b`).end().String(): `{"event":"request aborted","level":"error","timestamp":"2026-03-04T05:06:07.089123Z","kv.preemptions":18,"kv_usage":0.41,"s":"a\"b"}`,
	} {
		if got != want {
			t.Errorf("\n got %s\nwant %s", got, want)
		}
		if strings.HasPrefix(got, "{") && !json.Valid([]byte(got)) {
			t.Errorf("invalid JSON %s", got)
		}
	}
}
