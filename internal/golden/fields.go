// Package golden is Loom's one definition of the golden-field contract
// (ARCHITECTURE.md §2): canonical attribute names, the default req_id format,
// and input_hash. Every component and tool uses it instead of spelling names itself.
package golden

// Canonical golden-field attribute names.
const (
	ReqID     = "req_id"
	Stage     = "stage"
	InputHash = "input_hash"
	ModelVer  = "model_ver"
	// ResourceUsagePrefix starts every numeric resource fact, e.g. resource_usage.latency_ms.
	ResourceUsagePrefix = "resource_usage."
)

// MaxReqIDBytes bounds a req_id. A longer value is no request's id: it is
// rejected, never cut, since two long ids that share a prefix would become
// one request.
const MaxReqIDBytes = 256

// UsableReqID reports whether id can be a request's id: not empty, and not
// longer than MaxReqIDBytes.
func UsableReqID(id string) bool { return id != "" && len(id) <= MaxReqIDBytes }

// Resource usage facts the workload and the scenarios rely on.
const (
	LatencyMs = ResourceUsagePrefix + "latency_ms"
	GPUMemMb  = ResourceUsagePrefix + "gpu_mem_mb"
	// Tokens is the number of input tokens of the request at that stage.
	Tokens = ResourceUsagePrefix + "tokens"
	// CPUPercent is the CPU use of the process at that point, 0–100 per core.
	CPUPercent = ResourceUsagePrefix + "cpu_percent"
	// SMInstructions is the number of GPU streaming-multiprocessor instructions executed.
	SMInstructions = ResourceUsagePrefix + "sm_instructions"
)

// Resource usage facts of a generation, as LLM instrumentation libraries and
// serving engines report them (aliases.go maps their names here). Times are
// in milliseconds.
const (
	InputTokens  = ResourceUsagePrefix + "input_tokens"
	OutputTokens = ResourceUsagePrefix + "output_tokens"
	TotalTokens  = ResourceUsagePrefix + "total_tokens"
	// TTFTMs is the time to first token; TPOTMs the time per output token after it.
	TTFTMs = ResourceUsagePrefix + "ttft_ms"
	TPOTMs = ResourceUsagePrefix + "tpot_ms"
	// QueueMs is the time the request waited before the engine scheduled it.
	QueueMs = ResourceUsagePrefix + "queue_ms"
	// PrefillMs and DecodeMs split the engine's time between the prompt and the output.
	PrefillMs = ResourceUsagePrefix + "prefill_ms"
	DecodeMs  = ResourceUsagePrefix + "decode_ms"
	// ForwardMs, ExecuteMs, InferenceMs and SchedulerMs are vLLM's finer
	// splits: forward passes, model execution with its syncs and sampling,
	// inference (prefill and decode), and scheduling.
	ForwardMs   = ResourceUsagePrefix + "forward_ms"
	ExecuteMs   = ResourceUsagePrefix + "execute_ms"
	InferenceMs = ResourceUsagePrefix + "inference_ms"
	SchedulerMs = ResourceUsagePrefix + "scheduler_ms"
)
