package goldenfieldprocessor

import (
	"cmp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loom-otel/loom/internal/golden"
)

const prompt = "  Write a   haiku about GPUs "

func TestInputHashAndRedaction(t *testing.T) {
	withConfig := func(mod func(*Config)) *Config {
		cfg := defaultConfig()
		mod(cfg)
		return cfg
	}
	tests := []struct {
		name  string
		cfg   *Config
		attrs map[string]any
		want  map[string]any
	}{
		{
			name:  "prompt hashed then removed",
			attrs: map[string]any{"prompt": prompt, "api_key": "k", "authorization": "Bearer x"},
			want:  map[string]any{golden.InputHash: golden.HashInput(prompt)},
		},
		{
			name:  "an existing input_hash is kept; the raw input still goes",
			attrs: map[string]any{"prompt": prompt, golden.InputHash: "0badf00d"},
			want:  map[string]any{golden.InputHash: "0badf00d"},
		},
		{
			name:  "source fields in configured order",
			attrs: map[string]any{"messages": `[{"role":"user"}]`, "gen_ai.prompt": prompt},
			want:  map[string]any{golden.InputHash: golden.HashInput(prompt)},
		},
		{
			name:  "nested raw input is raw input too",
			attrs: map[string]any{"request.prompt": prompt},
			want:  map[string]any{golden.InputHash: golden.HashInput(prompt)},
		},
		{
			name:  "an indexed prompt is hashed from its first content; the role stays",
			attrs: map[string]any{"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": prompt, "gen_ai.prompt.1.content": "later", "gen_ai.completion.0.content": "answer"},
			want:  map[string]any{golden.InputHash: golden.HashInput(prompt), "gen_ai.prompt.0.role": "user"},
		},
		{
			name:  "OpenInference input.value is raw input, output.value is redacted, the token count renamed",
			attrs: map[string]any{"output.value": "answer", "input.value": prompt, "input.mime_type": "text/plain", "llm.token_count.prompt": 5},
			want:  map[string]any{golden.InputHash: golden.HashInput(prompt), "input.mime_type": "text/plain", golden.InputTokens: int64(5)},
		},
		{
			name:  "a source field written whole wins over an indexed one",
			attrs: map[string]any{"llm.input_messages.0.message.content": "first", "gen_ai.prompt": prompt},
			want:  map[string]any{golden.InputHash: golden.HashInput(prompt)},
		},
		{
			name:  "lowercase normalization",
			cfg:   withConfig(func(c *Config) { c.InputHash.Normalization = golden.NormalizeLowercase }),
			attrs: map[string]any{"prompt": prompt},
			want:  map[string]any{golden.InputHash: golden.HashInput(strings.ToLower(prompt))},
		},
		{
			name:  "mask mode",
			cfg:   withConfig(func(c *Config) { c.Redaction.Mode = RedactionMask }),
			attrs: map[string]any{"prompt": prompt, "password": "hunter2"},
			want:  map[string]any{golden.InputHash: golden.HashInput(prompt), "prompt": "[REDACTED]", "password": "[REDACTED]"},
		},
		{
			name:  "redaction explicitly off keeps raw input",
			cfg:   withConfig(func(c *Config) { c.Redaction.Enabled = false }),
			attrs: map[string]any{"prompt": prompt, "api_key": "k"},
			want:  map[string]any{golden.InputHash: golden.HashInput(prompt), "prompt": prompt, "api_key": "k"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg == nil {
				cfg = defaultConfig()
			}
			attrs, _ := runOne(t, cfg, rec{attrs: tt.attrs})
			got := attrs.AsRaw()
			for _, k := range []string{golden.ValidAttr, golden.MissingAttr, golden.InvalidAttr} {
				delete(got, k)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestBodyRedaction(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"email", `user alice.smith+x@example.co.uk asked`, `user [REDACTED] asked`},
		{"phone", `call +1 415-555-0132 or (415) 555-0199`, `call [REDACTED] or [REDACTED]`},
		{"api keys", `key=sk-abcdefghijklmnopqrstuv auth: Bearer abcdefghijklmnopqrstuvwxyz0123`, `key=[REDACTED] auth: [REDACTED]`},
		{"bearer in any case, after any space", "auth: BEARER abcdefghijklmnopqrstuvwxyz0123 or bearer\tabcdefghijklmnopqrstuvwxyz0123", "auth: [REDACTED] or [REDACTED]"},
		{"ids, times and numbers are not phones", `req-1715234890123-a1b2c3 at 2024-05-09 12:34:56 took 2340 ms tokens=523`, `req-1715234890123-a1b2c3 at 2024-05-09 12:34:56 took 2340 ms tokens=523`},
		{"logfmt raw input", `level=info prompt="tell me a secret" req_id=req-1715234890123-a1b2c3`, `level=info prompt=[REDACTED] req_id=req-1715234890123-a1b2c3`},
		{"JSON sensitive attribute", `{"password":"hunter2","n":1}`, `{"password":"[REDACTED]","n":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, lr := runOne(t, defaultConfig(), rec{body: tt.body})
			assert.Equal(t, tt.want, lr.Body().Str())
		})
	}
	t.Run("custom pattern", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Redaction.CustomPatterns = []string{`acct-\d+`}
		_, lr := runOne(t, cfg, rec{body: "charged acct-991 ok"})
		assert.Equal(t, "charged [REDACTED] ok", lr.Body().Str())
	})
	t.Run("structured body", func(t *testing.T) {
		attrs, lr := runOne(t, defaultConfig(), rec{body: map[string]any{"prompt": prompt, "user": map[string]any{"email": "a@b.io", "id": 7}}})
		assert.Equal(t, map[string]any{"user": map[string]any{"id": int64(7)}}, lr.Body().Map().AsRaw())
		assert.Equal(t, golden.HashInput(prompt), attrs.AsRaw()[golden.InputHash])
		assert.NotContains(t, attrs.AsRaw(), "user.email")
	})
}

func TestPatternHints(t *testing.T) {
	for s, want := range map[string]bool{"sk-x": true, "AKIA": true, "Bearer x": true, "bearer x": true, "BEARER x": true, "bEaReR\tx": true, "Bearerx": false, "ghp_x": true, "ghu_x": true, "xoxb": true,
		"ask me": false, "ghx_": false, "gh": false, "b": false, "": false, "AKI": false,
		strings.Repeat("x-", 40) + "Bearer x": true, strings.Repeat("ab ", 40): false} {
		assert.Equal(t, want, hasKeyPrefix(s), s)
	}
	for s, want := range map[string]bool{"+44 20": true, "a+1": true, "+": false, "1+": false, "+x +2": true, "x+": false} {
		assert.Equal(t, want, hasCountryCode(s), s)
	}
}

func TestHasPhoneTail(t *testing.T) {
	for s, want := range map[string]bool{"415-555-0132": true, "(415) 555-0132": true, "5 1234": true, "a-1234": false, "1-12345": false, "1-123": false, "": false} {
		assert.Equal(t, want, hasPhoneTail(s), s)
	}
}

func TestComparePaths(t *testing.T) {
	ordered := []string{"gen_ai.prompt", "gen_ai.prompt.0.content", "gen_ai.prompt.2.content", "gen_ai.prompt.10.content", "gen_ai.prompt.x"}
	for i := range ordered {
		for j := range ordered {
			assert.Equal(t, cmp.Compare(i, j), comparePaths(ordered[i], ordered[j]), "%s vs %s", ordered[i], ordered[j])
		}
	}
}
