package golden

import "strings"

// The GenAI semantic-convention token counts that fuller validation profiles require.
const (
	InputTokens  = "gen_ai.usage.input_tokens"
	OutputTokens = "gen_ai.usage.output_tokens"
)

// DefaultAliases returns a fresh copy of the contract's alias table (ARCHITECTURE.md §2):
// field names that services write, mapped to their canonical names. Callers may add
// their own entries to the copy.
func DefaultAliases() map[string]string {
	return map[string]string{
		"request_id":     ReqID,
		"requestId":      ReqID,
		"x_request_id":   ReqID,
		"x-request-id":   ReqID,
		"llm.request_id": ReqID,
		"inference_id":   ReqID,

		"model":                ModelVer,
		"model_name":           ModelVer,
		"gen_ai.request.model": ModelVer,
		"llm.model_name":       ModelVer,

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
	}
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
