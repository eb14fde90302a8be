package goldenfieldprocessor

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loom-otel/loom/internal/golden"
)

func TestNormalization(t *testing.T) {
	withConfig := func(mod func(*Config)) *Config {
		cfg := defaultConfig()
		mod(cfg)
		return cfg
	}
	tests := []struct {
		name   string
		cfg    *Config
		attrs  map[string]any
		want   map[string]any
		absent []string
	}{
		{
			name:   "request id aliases",
			attrs:  map[string]any{"request_id": "req-1715234890123-a1b2c3"},
			want:   map[string]any{golden.ReqID: "req-1715234890123-a1b2c3"},
			absent: []string{"request_id"},
		},
		{
			name:   "of several aliases the first in name order wins",
			attrs:  map[string]any{"x_request_id": "ignored", "llm.request_id": "req-1715234890123-a1b2c3"},
			want:   map[string]any{golden.ReqID: "req-1715234890123-a1b2c3"},
			absent: []string{"x_request_id", "llm.request_id"},
		},
		{
			name:  "canonical name wins over its aliases",
			attrs: map[string]any{golden.ReqID: "req-1715234890123-canon1", "request_id": "req-1715234890123-alias1"},
			want:  map[string]any{golden.ReqID: "req-1715234890123-canon1"},
		},
		{
			name:  "gen_ai sources are read and left in place",
			attrs: map[string]any{"gen_ai.request.model": "llama3-8b-v2.1.4"},
			want:  map[string]any{golden.ModelVer: "llama3-8b-v2.1.4", "gen_ai.request.model": "llama3-8b-v2.1.4"},
		},
		{
			name:   "model_name and numeric strings",
			attrs:  map[string]any{"model_name": "llama3-8b-v2.1.4", "duration_ms": "2340", "gpu_mem_mb": 12450.0},
			want:   map[string]any{golden.ModelVer: "llama3-8b-v2.1.4", golden.LatencyMs: int64(2340), golden.GPUMemMb: 12450.0},
			absent: []string{"model_name", "duration_ms", "gpu_mem_mb"},
		},
		{
			name:  "resource_usage strings become numbers",
			attrs: map[string]any{"resource_usage.queue_ms": " 12.5 ", golden.InputTokens: "523"},
			want:  map[string]any{"resource_usage.queue_ms": 12.5, golden.InputTokens: int64(523)},
		},
		{
			name:  "model alias map",
			cfg:   withConfig(func(c *Config) { c.Normalize.Models = map[string]string{"qwen": "qwen2-7b-chat"} }),
			attrs: map[string]any{"model": "qwen"},
			want:  map[string]any{golden.ModelVer: "qwen2-7b-chat"},
		},
		{
			name:   "user alias added, default alias removed",
			cfg:    withConfig(func(c *Config) { c.Normalize.Aliases = map[string]string{"trace_req": golden.ReqID, "model": ""} }),
			attrs:  map[string]any{"trace_req": "req-1715234890123-a1b2c3", "model": "kept-as-is"},
			want:   map[string]any{golden.ReqID: "req-1715234890123-a1b2c3", "model": "kept-as-is"},
			absent: []string{"trace_req", golden.ModelVer},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg == nil {
				cfg = defaultConfig()
			}
			attrs, _ := runOne(t, cfg, rec{attrs: tt.attrs})
			for k, want := range tt.want {
				assert.Equal(t, want, attrs.AsRaw()[k], k)
			}
			for _, k := range tt.absent {
				assert.NotContains(t, attrs.AsRaw(), k)
			}
		})
	}
}

func TestNumericCoercionFailureIsInvalid(t *testing.T) {
	attrs, _ := runOne(t, defaultConfig(), rec{attrs: map[string]any{"latency_ms": "fast", "resource_usage.gpu_mem_mb": true}})
	assert.Equal(t, "fast", attrs.AsRaw()[golden.LatencyMs], "the value is kept")
	assert.Equal(t, false, attrs.AsRaw()[golden.ValidAttr])
	assert.ElementsMatch(t, []string{"resource_usage.*", "resource_usage.*"}, strList(attrs, golden.InvalidAttr))
}

func TestNormalizeStage(t *testing.T) {
	for in, want := range map[string]string{
		"model/forward":       "model/forward",
		"Model.Forward":       "model/forward",
		"postproc:filter":     "postproc/filter",
		" cache / miss ":      "cache/miss",
		"/preproc//normalize": "preproc/normalize",
		`celery\task_start`:   "celery/task_start",
		"ÜBER/Stage":          "über/stage",
		"":                    "",
	} {
		assert.Equal(t, want, normalizeStage(in), in)
	}
	attrs, _ := runOne(t, defaultConfig(), rec{attrs: map[string]any{"stage": "Model.Forward"}})
	assert.Equal(t, "model/forward", attrs.AsRaw()[golden.Stage])
}
