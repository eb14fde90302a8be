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
