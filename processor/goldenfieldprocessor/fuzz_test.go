package goldenfieldprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/canarytest"
	"github.com/loom-otel/loom/internal/golden"
)

// Whatever the body and attribute values, the processor neither fails nor lets
// a raw prompt out, and every record comes out tagged. layout generates a
// content-bearing key, a depth and one of the canary test's placements: the
// canary under that key in that placement, and that deep in a record's
// attributes and JSON body, never comes out of the log or span payload either.
// A second prompt under an alias of prompt loses to the first, and is listed
// in golden.conflicts redacted.
func FuzzConsumeLogs(f *testing.F) {
	for _, seed := range []struct {
		body, value string
		layout      []byte
	}{
		{`{"level":"info","req_id":"req-1715234890123-a1b2c3","usage":{"prompt_tokens":5}}`, "hello", []byte{0, 0, 0}},
		{"level=info stage=postproc/filter req_id=req-1715234890123-a1b2c3 output_length=0", `say "hi"`, []byte{9, 3, 1, 2, 4}},
		{"[req-1715234890123-a1b2c3] normalized input tokens=523", "\xff\xfe", []byte{3, 7, 2}},
		{"Traceback (most recent call last):\n  File \"x.py\"\nValueError: x", strings.Repeat("é", 300), []byte{12, 11, 4, 5, 6, 7}},
		{`{"a":` + strings.Repeat(`[`, 500), "2340", []byte{7, 10, 3}},
		{"user bob@example.com call 415-555-0132", "Model.Forward", []byte{5, 1, 4, 0, 0, 1, 2, 3}},
	} {
		f.Add(seed.body, seed.value, seed.layout)
	}
	cfg := defaultConfig()
	cfg.Extract.MaxBodyBytes = 512
	cfg.Drift.MinRecords = 2
	cfg.Normalize.Aliases = map[string]string{"query_text": "prompt"}
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), settings(nil), cfg, sink)
	require.NoError(f, err)
	f.Cleanup(func() { require.NoError(f, p.Shutdown(context.Background())) })
	placed := canarytest.Placements()

	f.Fuzz(func(t *testing.T, body, value string, layout []byte) {
		sink.Reset()
		secret := "SECRETX" + value
		quoted, _ := json.Marshal(secret)
		recs := []rec{
			{service: "fuzz", body: body, attrs: map[string]any{"prompt": secret, "query_text": "SECRET2" + value, "stage": value, "duration_ms": value, "model_ver": value}},
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
			if i == 0 { // the body may add conflicts of its own
				conflicts := strList(lr.Attributes(), golden.ConflictsAttr)
				require.Contains(t, conflicts, "prompt query_text=[REDACTED]")
				for _, c := range conflicts {
					require.NotContains(t, c, "query_text=SECRET2")
				}
			}
			if i > 0 {
				require.NotContains(t, lr.Body().Str(), "SECRETX", "raw input left in body %q", lr.Body().Str())
			}
		}
		require.Len(t, logRecordsWithout(sink.AllLogs(), golden.SchemaDriftEvent), len(recs))

		key, depth, placement := generatedContentKey(layout)
		pl := placed[placement%len(placed)]
		ld, lp, td, _ := pl.Place(key, secret)
		deep := lp.Scope.LogRecords().AppendEmpty()
		nested := deep.Attributes()
		for range depth {
			nested = nested.PutEmptyMap("level")
		}
		nested.PutStr(key, secret)
		deep.Body().SetStr(nestedJSON(depth, key, string(quoted)))
		logsJSON, tracesJSON := runPayloads(t, cfg, ld, td)
		require.NotContains(t, logsJSON, "SECRETX", "under %q in %s, %d deep", key, pl.Name, depth)
		require.NotContains(t, tracesJSON, "SECRETX", "under %q in %s", key, pl.Name)
	})
}

// Segments a generated content key is made of: plain and index segments
// around it, a content word, then what may come under it.
var (
	fuzzPlainSegments = []string{"request", "llm", "gen_ai", "data", "0", "7", "Payload", "x_y", "vendor-ai"}
	fuzzContentWords  = []string{"prompt", "prompts", "completion", "completions", "messages", "content", "contents",
		"input_messages", "output_messages", "systemPrompt", "instructions", "input", "output", "Prompt", "user_prompt"}
	fuzzContentLeaves = []string{"", ".0.content", ".text", ".1.message.content", ".value", ".3", ".parts.0.text"}
)

// generatedContentKey makes a content-bearing key, a depth and a placement
// from layout: its first byte is the depth and the placement, its last two the
// content word and what comes under it, and the bytes between the plain or
// index segments before it.
func generatedContentKey(layout []byte) (key string, depth uint8, placement int) {
	if len(layout) < 3 {
		layout = append(layout, 0, 0, 0)
	}
	depth, placement = layout[0]%12, int(layout[0]/12)
	var segs []string
	for _, b := range layout[1 : len(layout)-2] {
		segs = append(segs, fuzzPlainSegments[int(b)%len(fuzzPlainSegments)])
	}
	word := fuzzContentWords[int(layout[len(layout)-2])%len(fuzzContentWords)]
	leaf := fuzzContentLeaves[int(layout[len(layout)-1])%len(fuzzContentLeaves)]
	return strings.Join(append(segs, word), ".") + leaf, depth, placement
}

// nestedJSON is a JSON object with key: value depth objects deep.
func nestedJSON(depth uint8, key, value string) string {
	s := fmt.Sprintf(`{%q:%s}`, key, value)
	for range depth {
		s = `{"level":` + s + `}`
	}
	return s
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
