package goldenfieldprocessor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
)

func newCompiled(t testing.TB, cfg *Config) *compiled {
	c, err := compile(cfg, componenttest.NewNopTelemetrySettings())
	require.NoError(t, err)
	return c
}

// The classifier recognizes content by the shape of a key, so names it was not
// written for (other vendors, casing, nesting, indexes) are classified too.
func TestClassify(t *testing.T) {
	c := newCompiled(t, defaultConfig())
	content := []string{
		// the placements the probe found
		"gen_ai.prompt.0.content", "gen_ai.completion.0.content", "llm.input_messages.0.message.content",
		"llm.output_messages.0.message.content", "input.value", "output.value", "llm.prompts", "request.prompt",
		// names the classifier was not written for
		"gen_ai.prompt.12.content", "GEN_AI.Prompt.0.Content", "ai.prompt.messages", "langchain.system_prompt",
		"vendor.userPrompt", "llm.input_messages.3.message.contents.0.message_content.text", "foo.bar.completions.7.text",
		"gen_ai.output.messages", "gen_ai.system_instructions", "llm.prompt_template.variables", "retrieval.documents.0.document.content",
		"payload.0.request.prompt", "chat.inputMessages", "Prompt", "model-completion", "input.value.0",
	}
	plain := []string{
		"prompt_tokens", "gen_ai.usage.prompt_tokens", "message_count", "gen_ai.prompt.0.role", "input_hash",
		"llm.token_count.prompt", "llm.input_messages.0.message.role", "gen_ai.completion.0.finish_reason",
		"input.mime_type", "output.mime_type", "http.request.header.content_type", "http.response.content_length",
		"exception.message", "message", "message.id", "message.type", "message.uncompressed_size", "gen_ai.usage.completion_tokens",
		"completionTokens", "llm.token_count.completion", "prompt_id", "status_code", "req_id", "stage", "model_ver",
		"gen_ai.prompt.0.tool_call_id", "resource_usage.input_tokens", "output_length",
	}
	for _, k := range content {
		assert.True(t, c.classify(k, false).input, "%s should be content", k)
		role, _ := c.role(k)
		assert.True(t, role.input, "%s should be content", k)
	}
	for _, k := range plain {
		role, _ := c.role(k)
		assert.False(t, role.input || role.sensitive, "%s should be plain", k)
	}
	sensitive := []string{"password", "user.password", "request.headers.authorization", "Authorization", "creds.0.api_key", "user.email"}
	for _, k := range sensitive {
		role, _ := c.role(k)
		assert.True(t, role.sensitive, "%s should be sensitive", k)
	}
	t.Run("message is content only in a content event", func(t *testing.T) {
		assert.True(t, c.classify("message", true).input)
		assert.True(t, c.classify("message.text", true).input)
		assert.False(t, c.classify("message.id", true).input)
		assert.False(t, c.classify("message", false).input)
		for name, want := range map[string]bool{
			"gen_ai.content.prompt": true, "gen_ai.content.completion": true, "gen_ai.user.message": true,
			"gen_ai.system.message": true, "gen_ai.assistant.message": true, "gen_ai.tool.message": true, "gen_ai.choice": true,
			"exception": false, "retry": false, "gen_ai.client.operation": false,
		} {
			assert.Equal(t, want, isContentEvent(name), name)
		}
	})
	t.Run("configured dotted names match as a suffix", func(t *testing.T) {
		cfg := defaultConfig()
		cfg.Redaction.Attributes = []string{"x.session_blob"}
		c := newCompiled(t, cfg)
		assert.True(t, c.classify("payload.0.x.session_blob", false).sensitive)
		assert.False(t, c.classify("session_blob", false).sensitive)
	})
}

// Mutating a content key's surroundings (prefixes, indexes, case) keeps it
// content; mutating the content word into a quantity or descriptor makes it plain.
func TestClassifyMutations(t *testing.T) {
	c := newCompiled(t, defaultConfig())
	prefixes := []string{"", "a.", "gen_ai.", "llm.", "x.0.", "Vendor.Sub.3."}
	for _, word := range []string{"prompt", "prompts", "completion", "completions", "messages", "content", "instructions", "input_messages", "output_messages", "systemPrompt"} {
		for _, prefix := range prefixes {
			for _, suffix := range []string{"", ".0", ".0.content", ".1.text"} {
				k := prefix + word + suffix
				assert.True(t, c.classify(k, false).input, k)
			}
			for _, suffix := range []string{"_tokens", "_count", "_length", "_id", "_type", ".0.role", ".0.finish_reason", "Tokens"} {
				k := prefix + word + suffix
				assert.False(t, c.classify(k, false).input, k)
			}
		}
	}
}

// keyMention finds a sensitive key written as a key in text, where classify
// says so: a quantity or a descriptor written as a key, or a mere mention, is no key.
func TestKeyMention(t *testing.T) {
	c := newCompiled(t, defaultConfig())
	for s, want := range map[string]int{
		`{"prompt": "x"`:                    2,
		`bad request: prompts='x'`:          13,
		`{"input_messages":[`:               2,
		`{"input.value": "x"`:               2,
		`gen_ai.prompt.0.role: user`:        26,
		`usage prompt_tokens=5`:             21,
		`the prompt was long`:               19,
		`{"a":{"gen_ai.completion" : "x"`:   7,
		`content-type: json`:                18,
		`message: hi`:                       11,
		`Bad request: {"systemPrompt": "x"`: 15,
		`failed password=hunter2 for user`:  7,
	} {
		assert.Equal(t, want, c.keyMention(s), s)
	}
}

// The role table remembers a bounded number of classified keys; past that,
// and for long keys, it classifies each time, with the same answers.
func TestRoleTableBounded(t *testing.T) {
	c := newCompiled(t, defaultConfig())
	start := len(*c.roles.current.Load())
	for i := range roleTableGrowth + 10 {
		role, known := c.role(fmt.Sprintf("vendor.k%d.prompt", i))
		require.True(t, role.input && known)
	}
	long := strings.Repeat("x", maxRememberedKey) + ".prompt"
	role, _ := c.role(long)
	assert.True(t, role.input)
	assert.Len(t, *c.roles.current.Load(), start+roleTableGrowth)
	role, _ = c.role("prompt_tokens")
	assert.False(t, role.input)
}
