package golden

// Stitching and causal-edge attributes (ARCHITECTURE.md §5): how a record tells
// the event graph which edges start from it.
const (
	// CausalParents lists the causes found by causal rules, each "{event.id of the cause}:{edge type}".
	CausalParents = "causal.parents"
	// CausalRules lists, entry by entry with CausalParents, the rule that found each cause.
	CausalRules = "causal.rules"
	// StitchDetached is true on a record of detached work: its trace is not the
	// primary trace of its request (async workers, sub-services that start new traces).
	StitchDetached = "stitch.detached"
	// StitchAsyncOf is, on a detached record, the event.id of its request's primary
	// root span: the target of the record's ASYNC_OF edge.
	StitchAsyncOf = "stitch.async_of"
	// GPUID names the GPU a record ran on, for joins by host.name and GPU.
	GPUID = "gpu.id"
	// GPUEventScope is the instrumentation scope of the gpu receiver's log
	// records: what reqidstitch selects GPU events by.
	GPUEventScope = "github.com/loom-otel/loom/receiver/gpureceiver"
	// GPUMemoryUsage and GPUMemoryLimit (bytes, semconv hw.gpu.memory.*) are
	// on the gpu receiver's memory-high records: the cause side of
	// reqidstitch's gpu_oom_cause_timeout rule.
	GPUMemoryUsage = "hw.gpu.memory.usage"
	GPUMemoryLimit = "hw.gpu.memory.limit"
	// ThreadVID is, on an event observed from the host (the gpu receiver's),
	// the thread's id in its own pid namespace: what the process's telemetry
	// reports as thread.id. process.vpid (semconv) is the same for the
	// process. Outside containers they equal thread.id and process.pid.
	ThreadVID = "thread.vid"
)
