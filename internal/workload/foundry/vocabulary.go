package foundry

import (
	"slices"
	"sort"
)

// Stages of the platform (the stage attribute), in request order.
const (
	stEdge     = "edge/ingress"
	stRoute    = "orch/route"
	stTemplate = "orch/template"
	stTokenize = "tok/encode"
	stEmbed    = "rag/embed"
	stLookup   = "rag/lookup"
	stAdapter  = "gen/adapter_load"
	stPrefill  = "gen/prefill"
	stDecode   = "gen/decode"
	stDenoise  = "img/denoise"
	stVAE      = "img/vae_decode"
	stGuard    = "guard/moderate"
	stStore    = "store/put"
	stPersist  = "async/persist"
	stBill     = "async/bill"
)

var (
	services = []string{svcEdge, svcRouter, svcTok, svcRAG, svcText, svcImage, svcGuard, svcStore, svcWriter, svcBiller}
	stages   = []string{stEdge, stRoute, stTemplate, stTokenize, stEmbed, stLookup, stAdapter, stPrefill, stDecode,
		stDenoise, stVAE, stGuard, stStore, stPersist, stBill}
	// attributes are the family's own span attribute names.
	attributes = []string{
		"acct.id", "orch.lane", "orch.target", "orch.template", "tok.count", "tok.pool_busy", "tok.queue_depth",
		"rag.dim", "rag.top_k", "rag.hits", "accel.uuid", "lora.adapter_id", "lora.cache", "prefix_cache",
		"kv.preemptions", "kv.evicted_blocks", "sched.batch_size", "resp.segment_map", "abort.reason",
		"guard.flagged", "judge.grade", "judge.score", "segments_stored", "store.bytes", "store.shard",
		"img.preset", "img.steps", "img.vae_dtype", "img.mean_luma", "img.blank", "img.nsfw_filtered",
	}
	// bodyKeys are the family's own keys in log bodies (JSON members and
	// key=value pairs), other than its attribute names and generic keys.
	bodyKeys = []string{
		"acct", "lane", "preset", "target", "template", "took_ms", "kv_usage", "in_use", "load_ms", "decode_ms",
		"finish_reason", "verdict", "flagged", "grade", "shard", "mean_luma", "nsfw_filtered", "kv_cache",
	}
)

// Vocabulary returns the names this family made up, sorted: its service
// names, stage names, attribute names and log-body keys. A detector whose
// source names one of them is tuned to this family. Left out are the names
// Loom is meant to know: OpenTelemetry semantic conventions (http.*, gen_ai.*,
// exception.*, service.*, host.name), the golden-field contract's canonical
// names and aliases (golden.DefaultAliases: x-request-id, llm.model_name,
// duration_ms, prompt_tokens, …), and the generic keys of logging formats
// (time, level, msg, event, status, …).
func Vocabulary() []string {
	out := slices.Concat(services, stages, attributes, bodyKeys)
	sort.Strings(out)
	return slices.Compact(out)
}
