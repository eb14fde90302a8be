package goldenfieldprocessor

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/golden"
)

// Whatever the body and attribute values, the processor neither fails nor lets
// a raw prompt out, and every record comes out tagged.
func FuzzConsumeLogs(f *testing.F) {
	for _, seed := range []struct{ body, value string }{
		{`{"level":"info","req_id":"req-1715234890123-a1b2c3","usage":{"prompt_tokens":5}}`, "hello"},
		{"level=info stage=postproc/filter req_id=req-1715234890123-a1b2c3 output_length=0", `say "hi"`},
		{"[req-1715234890123-a1b2c3] normalized input tokens=523", "\xff\xfe"},
		{"Traceback (most recent call last):\n  File \"x.py\"\nValueError: x", strings.Repeat("é", 300)},
		{`{"a":` + strings.Repeat(`[`, 500), "2340"},
		{"user bob@example.com call 415-555-0132", "Model.Forward"},
	} {
		f.Add(seed.body, seed.value)
	}
	cfg := defaultConfig()
	cfg.Extract.MaxBodyBytes = 512
	cfg.Drift.MinRecords = 2
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), settings(nil), cfg, sink)
	require.NoError(f, err)
	f.Cleanup(func() { require.NoError(f, p.Shutdown(context.Background())) })

	f.Fuzz(func(t *testing.T, body, value string) {
		sink.Reset()
		secret := "SECRETX" + value
		quoted, _ := json.Marshal(secret)
		recs := []rec{
			{service: "fuzz", body: body, attrs: map[string]any{"prompt": secret, "stage": value, "duration_ms": value, "model_ver": value}},
			{service: "fuzz", body: `{"req_id":"req-1715234890123-a1b2c3","prompt":` + string(quoted) + `}`},
			{service: "fuzz", body: "level=info prompt=" + strconv.Quote(secret) + " stage=" + value},
		}
		require.NoError(t, p.ConsumeLogs(context.Background(), makeLogs(t, recs...)))
		for i, lr := range logRecords(sink.AllLogs()) {
			if lr.EventName() == golden.SchemaDriftEvent {
				continue
			}
			attrs := lr.Attributes().AsRaw()
			require.NotContains(t, attrs, "prompt")
			require.Contains(t, attrs, golden.ValidAttr)
			if i > 0 {
				require.NotContains(t, lr.Body().Str(), "SECRETX", "raw input left in body %q", lr.Body().Str())
			}
		}
		require.Len(t, logRecordsWithout(sink.AllLogs(), golden.SchemaDriftEvent), len(recs))
	})
}

func logRecordsWithout(all []plog.Logs, event string) []plog.LogRecord {
	var out []plog.LogRecord
	for _, lr := range logRecords(all) {
		if lr.EventName() != event {
			out = append(out, lr)
		}
	}
	return out
}
