package golden

import "strings"

// The GenAI semantic-convention token counts, read as sources of
// resource_usage.input_tokens and output_tokens and left in place.
const (
	GenAIInputTokens  = "gen_ai.usage.input_tokens"
	GenAIOutputTokens = "gen_ai.usage.output_tokens"
)

// Alias is what the normalization does with one source attribute.
type Alias struct {
	// Canonical is the golden field the value is copied to.
	Canonical string
	// Scale multiplies a numeric value on the way (1000 turns seconds into
	// milliseconds); 0 means the value is copied as it is.
	Scale float64
	// TrimPrefix is cut from the front of a string value: vLLM's request id
	// is the client's X-Request-ID behind the OpenAI object prefix.
	TrimPrefix []string
	// Preferred wins over the other aliases of its canonical name on one
	// record: the model that answered says more than the model asked for.
	Preferred bool
}

// plainAliases are the field names that services write (ARCHITECTURE.md §2).
var plainAliases = map[string]string{
	"request_id":     ReqID,
	"requestId":      ReqID,
	"x_request_id":   ReqID,
	"x-request-id":   ReqID,
	"llm.request_id": ReqID,
	"inference_id":   ReqID,

	"model":          ModelVer,
	"model_name":     ModelVer,
	"llm.model_name": ModelVer,

	"latency_ms":  LatencyMs,
	"duration_ms": LatencyMs,
	"gpu_mem_mb":  GPUMemMb,
	"cpu_percent": CPUPercent,
	"tokens":      Tokens,

	"sm_instructions": SMInstructions,

	"prompt_tokens":           InputTokens,
	"input_tokens":            InputTokens,
	"usage.prompt_tokens":     InputTokens,
	"completion_tokens":       OutputTokens,
	"output_tokens":           OutputTokens,
	"usage.completion_tokens": OutputTokens,
	"total_tokens":            TotalTokens,
	"usage.total_tokens":      TotalTokens,
}

// conventions are the attributes of the instrumentation conventions Loom
// reads, each mapped once onto a golden field. The table in
// internal/golden/README.md lists them with the libraries that write them;
// conventions_test.go checks it against this one.
var conventions = map[string]Alias{
	// OpenTelemetry GenAI semantic conventions, current and older names.
	"gen_ai.request.model":           {Canonical: ModelVer},
	"gen_ai.response.model":          {Canonical: ModelVer, Preferred: true},
	GenAIInputTokens:                 {Canonical: InputTokens},
	GenAIOutputTokens:                {Canonical: OutputTokens},
	"gen_ai.usage.prompt_tokens":     {Canonical: InputTokens},
	"gen_ai.usage.completion_tokens": {Canonical: OutputTokens},
	"gen_ai.usage.total_tokens":      {Canonical: TotalTokens},
	// OpenLLMetry (Traceloop) before it moved to gen_ai.usage.total_tokens.
	"llm.usage.total_tokens": {Canonical: TotalTokens},
	// OpenInference.
	"llm.token_count.prompt":     {Canonical: InputTokens},
	"llm.token_count.completion": {Canonical: OutputTokens},
	"llm.token_count.total":      {Canonical: TotalTokens},
	// vLLM's request span (llm_request): its id and its latencies in seconds.
	"gen_ai.request.id":                      {Canonical: ReqID, TrimPrefix: []string{"chatcmpl-", "cmpl-"}},
	"gen_ai.latency.e2e":                     {Canonical: LatencyMs, Scale: 1000},
	"gen_ai.latency.time_to_first_token":     {Canonical: TTFTMs, Scale: 1000},
	"gen_ai.latency.time_in_queue":           {Canonical: QueueMs, Scale: 1000},
	"gen_ai.latency.time_in_model_prefill":   {Canonical: PrefillMs, Scale: 1000},
	"gen_ai.latency.time_in_model_decode":    {Canonical: DecodeMs, Scale: 1000},
	"gen_ai.latency.time_in_model_forward":   {Canonical: ForwardMs, Scale: 1000},
	"gen_ai.latency.time_in_model_execute":   {Canonical: ExecuteMs, Scale: 1000},
	"gen_ai.latency.time_in_model_inference": {Canonical: InferenceMs, Scale: 1000},
	"gen_ai.latency.time_in_scheduler":       {Canonical: SchedulerMs, Scale: 1000},
}

// DefaultAliases returns a fresh copy of the contract's alias table (ARCHITECTURE.md §2)
// and of the instrumentation conventions: field names that services and
// libraries write, mapped to their canonical names. Callers may add their own
// entries to the copy.
func DefaultAliases() map[string]string {
	out := make(map[string]string, len(plainAliases)+len(conventions))
	for alias, canonical := range plainAliases {
		out[alias] = canonical
	}
	for alias, a := range conventions {
		out[alias] = a.Canonical
	}
	return out
}

// AliasOf returns how a default alias is applied: its canonical name, and
// any scaling, prefix trimming or precedence. ok is false for names outside
// the default table, which configured aliases copy as they are.
func AliasOf(alias string) (a Alias, ok bool) {
	if a, ok := conventions[alias]; ok {
		return a, true
	}
	canonical, ok := plainAliases[alias]
	return Alias{Canonical: canonical}, ok
}

// KeepsSource reports whether an alias stays on the record after its value has been
// copied to the canonical name: OpenTelemetry GenAI semantic-convention attributes
// (gen_ai.*) are read as sources and left in place.
func KeepsSource(alias string) bool {
	return strings.HasPrefix(alias, "gen_ai.")
}

// IsResourceUsage reports whether name is a resource_usage.* fact, whose values must be numbers.
func IsResourceUsage(name string) bool {
	return strings.HasPrefix(name, ResourceUsagePrefix)
}

// TPOT derives the time per output token of a generation from its
// end-to-end latency, its time to first token and its output tokens, as the
// serving engines define it: the decode time spread over the tokens after
// the first. ok is false when there is no second token.
func TPOT(latencyMs, ttftMs float64, outputTokens int64) (tpotMs float64, ok bool) {
	if outputTokens < 2 || latencyMs < ttftMs || ttftMs < 0 {
		return 0, false
	}
	return (latencyMs - ttftMs) / float64(outputTokens-1), true
}
