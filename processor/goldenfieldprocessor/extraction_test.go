package goldenfieldprocessor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/golden"
)

func TestExtraction(t *testing.T) {
	traceback := "Traceback (most recent call last):\n  File \"worker.py\", line 42, in run\n    out = model(batch)  # req-1715234890123-a1b2c3\nRuntimeError: CUDA out of memory"
	tests := []struct {
		name string
		body any
		// attrs already on the record
		attrs map[string]any
		want  map[string]any
		// absent attributes
		absent []string
	}{
		{
			name: "gateway JSON, nested keys flattened",
			body: `{"level":"info","msg":"received request","req_id":"req-1715234890123-a1b2c3","usage":{"prompt_tokens":523},"latency_ms":12.5}`,
			want: map[string]any{"level": "info", "msg": "received request", "req_id": "req-1715234890123-a1b2c3", "resource_usage.input_tokens": int64(523), "resource_usage.latency_ms": 12.5},
		},
		{
			name: "logfmt from postproc",
			body: "level=info stage=postproc/filter req_id=req-1715234890123-a1b2c3 output_length=0 filter_reason=empty_after_dedup",
			want: map[string]any{"level": "info", "stage": "postproc/filter", "req_id": "req-1715234890123-a1b2c3", "output_length": "0", "filter_reason": "empty_after_dedup"},
		},
		{
			name: "plain text from preproc",
			body: "[req-1715234890123-a1b2c3] normalized input tokens=523",
			want: map[string]any{"req_id": "req-1715234890123-a1b2c3", "resource_usage.tokens": int64(523)},
		},
		{
			name: "plain text with stage and latency",
			body: "cache miss for req_1715234890123_9f86d0 stage=cache/miss latency_ms=3",
			want: map[string]any{"req_id": "req_1715234890123_9f86d0", "stage": "cache/miss", "resource_usage.latency_ms": int64(3)},
		},
		{
			name: "celery id in free text",
			body: "Task run_inference[req-celery-0f8fad5b-d9cb-469f-a165-70867728950e] received",
			want: map[string]any{"req_id": "req-celery-0f8fad5b-d9cb-469f-a165-70867728950e"},
		},
		{
			name: "multi-line traceback is one record, searched whole",
			body: traceback,
			want: map[string]any{"req_id": "req-1715234890123-a1b2c3"},
		},
		{
			name:   "invalid JSON is treated as text",
			body:   `{"level":"error","msg":"boom" req-1715234890123-a1b2c3`,
			want:   map[string]any{"req_id": "req-1715234890123-a1b2c3"},
			absent: []string{"level", "msg"},
		},
		{
			name:  "attributes already present win over the body",
			body:  `{"req_id":"req-1715234890123-bodyid","stage":"model/forward"}`,
			attrs: map[string]any{"req_id": "req-1715234890123-attrid"},
			want:  map[string]any{"req_id": "req-1715234890123-attrid", "stage": "model/forward"},
		},
		{
			name: "structured body is flattened",
			body: map[string]any{"req_id": "req-1715234890123-a1b2c3", "model": map[string]any{"name": "x"}},
			want: map[string]any{"req_id": "req-1715234890123-a1b2c3", "model.name": "x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs, lr := runOne(t, defaultConfig(), rec{body: tt.body, attrs: tt.attrs})
			for k, want := range tt.want {
				got, ok := attrs.Get(k)
				require.Truef(t, ok, "attribute %s missing; have %v", k, attrs.AsRaw())
				assert.Equal(t, want, got.AsRaw(), k)
			}
			for _, k := range tt.absent {
				_, ok := attrs.Get(k)
				assert.False(t, ok, "attribute %s should not be extracted", k)
			}
			if s, ok := tt.body.(string); ok {
				assert.Equal(t, s, lr.Body().Str(), "the body is kept")
			}
		})
	}
}

func TestExtractionBadInput(t *testing.T) {
	t.Run("body over max_body_bytes is parsed only up to the limit", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Extract.MaxBodyBytes = 40
		body := "stage=model/forward pad=" + strings.Repeat("x", 20) + " req_id=req-1715234890123-a1b2c3"
		attrs, lr := runOne(t, cfg, rec{body: body})
		assert.Equal(t, "model/forward", attrs.AsRaw()["stage"])
		assert.NotContains(t, attrs.AsRaw(), "req_id", "the pair past the limit is not parsed")
		assert.Equal(t, body, lr.Body().Str())
	})
	t.Run("invalid UTF-8 is sanitized in bodies and attributes", func(t *testing.T) {
		attrs, lr := runOne(t, defaultConfig(), rec{body: "stage=model/forward note=\xff\xfe", attrs: map[string]any{"x": "a\xffb"}})
		assert.Equal(t, "stage=model/forward note=\uFFFD", lr.Body().Str())
		assert.Equal(t, "a\uFFFDb", attrs.AsRaw()["x"])
	})
	t.Run("deep nesting is kept as JSON text", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Extract.MaxDepth = 2
		deep := `{"a":{"b":{"c":{"d":1}}},"stage":"x"}`
		attrs, _ := runOne(t, cfg, rec{body: deep})
		assert.Equal(t, `{"c":{"d":1}}`, attrs.AsRaw()["a.b"])
		deeper := `{"a":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat(`}`, 5001)
		attrs, _ = runOne(t, cfg, rec{body: deeper})
		assert.True(t, strings.HasPrefix(attrs.AsRaw()["a.a"].(string), `{"a":{"a":`), "kept as (truncated) JSON text")
	})
	t.Run("huge attribute values are truncated", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Normalize.MaxValueBytes = 100
		attrs, _ := runOne(t, cfg, rec{attrs: map[string]any{"note": strings.Repeat("é", 80)}})
		got := attrs.AsRaw()["note"].(string)
		assert.Len(t, got, 100)
		assert.Equal(t, strings.Repeat("é", 50), got)
	})
	t.Run("an over-long req_id is rejected, never cut", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Normalize.MaxValueBytes = 100
		long := "req-" + strings.Repeat("a", golden.MaxReqIDBytes)
		for _, attrs := range []map[string]any{{golden.ReqID: long}, {"request_id": long}} {
			got, _ := runOne(t, cfg, rec{attrs: attrs})
			assert.NotContains(t, got.AsRaw(), golden.ReqID, "two long ids that share a prefix must not become one request")
			assert.NotContains(t, got.AsRaw(), "request_id")
			assert.Contains(t, got.AsRaw()[golden.InvalidAttr], golden.ReqID)
		}
		atBound := "req-" + strings.Repeat("b", golden.MaxReqIDBytes-4)
		got, _ := runOne(t, cfg, rec{attrs: map[string]any{golden.ReqID: atBound}})
		assert.Equal(t, atBound, got.AsRaw()[golden.ReqID], "an id within the bound is kept whole, even above max_value_bytes")
	})
	t.Run("too many fields", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Extract.MaxFields = 3
		attrs, _ := runOne(t, cfg, rec{body: `{"a":1,"b":2,"c":3,"d":4,"e":5}`})
		assert.Contains(t, attrs.AsRaw(), "c")
		assert.NotContains(t, attrs.AsRaw(), "d")
	})
	t.Run("extraction off leaves attributes alone", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Extract.Enabled = false
		attrs, _ := runOne(t, cfg, rec{body: `{"stage":"x"}`})
		assert.NotContains(t, attrs.AsRaw(), "stage")
	})
}

func TestExtractedJSONBodyStaysValidAfterMasking(t *testing.T) {
	body := `{"req_id":"req-1715234890123-a1b2c3","prompt":"tell me a \"secret\"","messages":[{"role":"user","content":"hi"}],"n":1}`
	attrs, lr := runOne(t, defaultConfig(), rec{body: body})
	var decoded map[string]any
	require.NoError(t, json.Unmarshal([]byte(lr.Body().Str()), &decoded), lr.Body().Str())
	assert.Equal(t, "[REDACTED]", decoded["prompt"])
	assert.Equal(t, "[REDACTED]", decoded["messages"])
	assert.NotContains(t, attrs.AsRaw(), "prompt")
	assert.NotContains(t, attrs.AsRaw(), "messages")
	assert.NotContains(t, lr.Body().Str(), "secret")
}

// A model_ver read from free text must look like a model: "model: model
// forward completed" names none, and a plain word never becomes model_ver
// (nor a Loki label value); a JSON or logfmt field is the service's own.
func TestFreeTextModelMustLookLikeAModel(t *testing.T) {
	for body, want := range map[string]string{
		"INFO model: model forward completed for req-1715234890000-abcdef": "",
		"WARN model=kv cache pressure":                                     "",
		"INFO model: llama3-8b-v2.1.4 loaded":                              "llama3-8b-v2.1.4",
		"INFO model: mistral-large loaded":                                 "mistral-large",
		`{"model":"batch","msg":"x"}`:                                      "batch",
	} {
		attrs, _ := runOne(t, defaultConfig(), rec{body: body})
		got := ""
		if v, ok := attrs.Get("model_ver"); ok {
			got = v.Str()
		}
		assert.Equal(t, want, got, body)
	}
}
