package goldenfieldprocessor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

// conventionsDir holds spans captured from the real instrumentation
// libraries (examples/inference-service/capture_conventions.py) and vLLM's
// request span, written after its source.
var conventionsDir = filepath.Join("..", "..", "internal", "golden", "testdata", "conventions")

// runFixture sends a captured OTLP JSON file through the default processor
// and returns its spans, with the attributes they came in with.
func runFixture(t *testing.T, name string) (out, in []ptrace.Span) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(conventionsDir, name))
	require.NoError(t, err)
	var u ptrace.JSONUnmarshaler
	td, err := u.UnmarshalTraces(raw)
	require.NoError(t, err)
	orig := ptrace.NewTraces()
	td.CopyTo(orig)
	sink := new(consumertest.TracesSink)
	p, err := NewFactory().CreateTraces(context.Background(), settings(nil), defaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	require.NoError(t, p.Shutdown(context.Background()))
	return allSpans(sink.AllTraces()...), allSpans(orig)
}

func allSpans(tds ...ptrace.Traces) []ptrace.Span {
	var out []ptrace.Span
	for _, td := range tds {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					out = append(out, sss.At(j).Spans().At(k))
				}
			}
		}
	}
	return out
}

func attr(m pcommon.Map, key string) any {
	if v, ok := m.Get(key); ok {
		return v.AsRaw()
	}
	return nil
}

// TestConventionsOfEachLibrary checks, on what each library really emits,
// that its attributes land on the golden fields once, with the semantic
// convention sources left in place.
func TestConventionsOfEachLibrary(t *testing.T) {
	type want struct {
		model                 string
		input, output, total  string // the source attribute of each token count
		keptSources, noLonger []string
	}
	tests := []struct {
		fixture string
		ok      want // the call the model server answered
		failed  want // the call the failing canary answered with HTTP 500
	}{
		{
			fixture: "openllmetry-0.62.4.json",
			ok: want{
				model: "llama3-8b-v2.1.4", input: "gen_ai.usage.input_tokens", output: "gen_ai.usage.output_tokens", total: "gen_ai.usage.total_tokens",
				keptSources: []string{"gen_ai.request.model", "gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.provider.name"},
			},
			failed: want{model: "llama3-8b"},
		},
		{
			fixture: "openllmetry-0.40.14.json",
			ok: want{
				model: "llama3-8b-v2.1.4", input: "gen_ai.usage.prompt_tokens", output: "gen_ai.usage.completion_tokens", total: "llm.usage.total_tokens",
				keptSources: []string{"gen_ai.request.model", "gen_ai.response.model", "gen_ai.usage.prompt_tokens", "gen_ai.system"},
				noLonger:    []string{"llm.usage.total_tokens"},
			},
			failed: want{model: "llama3-8b"},
		},
		{
			fixture: "openinference-0.1.66.json",
			ok: want{
				model: "llama3-8b-v2.1.4", input: "llm.token_count.prompt", output: "llm.token_count.completion", total: "llm.token_count.total",
				noLonger: []string{"llm.model_name", "llm.token_count.prompt"},
			},
			// OpenInference names no model on a call that failed.
			failed: want{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			out, in := runFixture(t, tt.fixture)
			require.Len(t, out, 2)
			for i, span := range out {
				failed := span.Status().Code() == ptrace.StatusCodeError
				w := tt.ok
				if failed {
					w = tt.failed
				}
				a, src := span.Attributes(), in[i].Attributes()
				if w.model == "" {
					assert.Nil(t, attr(a, golden.ModelVer), "model_ver")
				} else {
					assert.Equal(t, w.model, attr(a, golden.ModelVer), "model_ver of the %s call", map[bool]string{true: "failed", false: "answered"}[failed])
				}
				for canonical, source := range map[string]string{golden.InputTokens: w.input, golden.OutputTokens: w.output, golden.TotalTokens: w.total} {
					if source == "" {
						assert.Nil(t, attr(a, canonical), canonical)
						continue
					}
					require.NotNil(t, attr(src, source), "the fixture has no %s", source)
					assert.Equal(t, attr(src, source), attr(a, canonical), "%s from %s", canonical, source)
				}
				for _, k := range w.keptSources {
					assert.Equal(t, attr(src, k), attr(a, k), "%s is a semantic-convention source and stays", k)
				}
				for _, k := range w.noLonger {
					assert.Nil(t, attr(a, k), "%s was renamed to its golden field", k)
				}
			}
		})
	}
}

func TestConventionsOfVLLMRequestSpan(t *testing.T) {
	out, _ := runFixture(t, "vllm-llm_request.json")
	require.Len(t, out, 1)
	a := out[0].Attributes()
	assert.Equal(t, "req-1715234890123-a1b2c3", attr(a, golden.ReqID), "vLLM's request id is the client's X-Request-ID behind chatcmpl-")
	assert.NotContains(t, strList(a, golden.InvalidAttr), golden.ReqID)
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", attr(a, golden.ModelVer))
	for canonical, want := range map[string]float64{
		golden.LatencyMs: 880, golden.TTFTMs: 80, golden.QueueMs: 12, golden.PrefillMs: 68, golden.DecodeMs: 800,
		golden.ForwardMs: 610, golden.ExecuteMs: 700, golden.InferenceMs: 868, golden.SchedulerMs: 4,
		// (880 - 80) ms over the 40 tokens after the first
		golden.TPOTMs: 20,
	} {
		v, ok := a.Get(canonical)
		require.True(t, ok, "%s missing; have %v", canonical, a.AsRaw())
		assert.InDelta(t, want, v.Double(), 1e-9, canonical)
	}
	assert.Equal(t, int64(412), attr(a, golden.InputTokens))
	assert.Equal(t, int64(41), attr(a, golden.OutputTokens))
	assert.Equal(t, 0.08, attr(a, "gen_ai.latency.time_to_first_token"), "the source stays, in seconds")
}

func TestConventionScalingKeepsBadValuesForValidation(t *testing.T) {
	attrs, _ := runOne(t, defaultConfig(), rec{attrs: map[string]any{"gen_ai.latency.e2e": "slow", "gen_ai.request.id": "chatcmpl-"}})
	assert.Contains(t, strList(attrs, golden.InvalidAttr), golden.ResourceUsagePrefix+"*", "a latency that is not a number is invalid, not scaled")
	assert.Equal(t, "chatcmpl-", attr(attrs, golden.ReqID), "a prefix with nothing behind it is left as it is")
}
