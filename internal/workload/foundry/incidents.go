package foundry

import (
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/workload"
)

// outOfMemory writes GPUOOM's evidence, all of it text: the engine's stderr
// traceback and switchyard's stdout line, neither with a severity number. The
// spans end without an error status: the stream had already started.
func (g *Generator) outOfMemory(b *build, eng *engine, at time.Duration) {
	tx := &g.text
	b.log(eng.svc, at, unset, trace.SpanContext{}, tx.python(b.start.Add(at), "kilnserve.engine", "ERROR").s("decode step failed for ").s(b.id).
		s("\nTraceback (most recent call last):\n").
		s("  File \"/opt/kilnserve/engine/decode.py\", line 211, in step\n    logits = self.model(input_ids, kv_cache=self.kv)\n").
		s("  File \"/usr/local/lib/python3.11/site-packages/torch/nn/modules/module.py\", line 1518, in _call_impl\n    return forward_call(*args, **kwargs)\n").
		s("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU ").i(int64(eng.card)).
		s(" has a total capacity of 79.10 GiB of which 1.12 GiB is free.").String())
	at += hop / 2
	b.log(g.topo.router, at, unset, trace.SpanContext{}, tx.slogText(b.start.Add(at), "ERROR", "generation failed").kv("x-request-id", b.id).
		kv("target", eng.svc.Instance).kv("err", "upstream: CUDA out of memory").String())
}

// abortThrashed writes the evidence of a KVThrash request the engine gave up
// on: an error status with a message and an exception event on the decode
// span, an abort.reason attribute, and a structlog line whose "level":"error"
// is in the body only.
func (g *Generator) abortThrashed(b *build, eng *engine, decodeAt, at time.Duration, dec decode) {
	msg := "aborted after " + strconv.FormatInt(dec.preemptions, 10) + " preemptions: KV cache exhausted"
	span := b.lastSpan()
	span.Error = msg
	span.Attrs = append(span.Attrs, attribute.String("abort.reason", "kv_exhausted"))
	span.Events = append(span.Events, workload.Event{Name: "exception", Time: b.start.Add(at), Attrs: []attribute.KeyValue{
		attribute.String("exception.type", "kilnserve.scheduler.PreemptionLimitExceeded"), attribute.String("exception.message", msg)}})
	b.log(eng.svc, at, unset, trace.SpanContext{}, g.text.structlog(b.start.Add(at), "error", "request aborted").str("stage", stDecode).
		str("llm.request_id", b.id).str("model", eng.model).str("accel.uuid", eng.gpu).num("kv.preemptions", dec.preemptions).
		num("kv.evicted_blocks", dec.evicted).str("abort.reason", "kv_exhausted").num("decode_ms", (at-decodeAt).Milliseconds()).end().String())
}

// incident is the ground truth an incident gives the requests it hits: the
// root cause (the attribute=value a ranking should put first, as on the
// records after goldenfield's normalization) and where the failure shows.
type incident struct {
	attribute, value string
	evidence         []workload.Evidence
}

func (t *topology) incidents() map[workload.Scenario]incident {
	type ev = workload.Evidence
	return map[workload.Scenario]incident{
		TokPool: {"service.instance.id", t.tok[1].Instance, []ev{{Kind: workload.EvidenceLatency, Stage: stTokenize}}},
		FieldDrop: {"model_ver", phiUpgraded, []ev{{Kind: workload.EvidenceMissingField, Stage: stDecode, Attribute: "resp.segment_map"},
			{Kind: workload.EvidenceValue, Stage: stStore, Attribute: "segments_stored", Value: "0"}}},
		StaleTemplate: {"orch.template", staleTemplate, []ev{{Kind: workload.EvidenceValue, Stage: stGuard, Attribute: "judge.grade", Value: "poor"}}},
		BlackImages: {"img.vae_dtype", blackDType, []ev{{Kind: workload.EvidenceValue, Stage: stVAE, Attribute: "img.blank", Value: "true"},
			{Kind: workload.EvidenceValue, Stage: stVAE, Attribute: "img.mean_luma", Value: "0"}}},
		LoraCold: {"lora.adapter_id", coldAdapter, []ev{{Kind: workload.EvidenceLatency, Stage: stAdapter}}},
		GPUOOM: {"accel.uuid", t.mixtral[3].gpu, []ev{{Kind: workload.EvidenceErrorText, Stage: stDecode},
			{Kind: workload.EvidenceErrorText, Stage: stRoute}}},
		LateWrite: {"store.shard", readOnlyShard, []ev{{Kind: workload.EvidenceErrorText, Stage: stPersist}}},
		KVThrash:  {"service.instance.id", t.mixtral[4].svc.Instance, []ev{{Kind: workload.EvidenceLatency, Stage: stDecode}}},
	}
}

// thrashEvidence is what a KVThrash request shows besides its slow decode:
// its preemption count, and the errors of an aborted one.
func thrashEvidence(dec decode) []workload.Evidence {
	type ev = workload.Evidence
	out := []ev{{Kind: workload.EvidenceValue, Stage: stDecode, Attribute: "kv.preemptions", Value: strconv.FormatInt(dec.preemptions, 10)}}
	if dec.aborted {
		out = append(out, ev{Kind: workload.EvidenceErrorStatus, Stage: stDecode}, ev{Kind: workload.EvidenceException, Stage: stDecode},
			ev{Kind: workload.EvidenceErrorAttribute, Stage: stDecode, Attribute: "abort.reason", Value: "kv_exhausted"},
			ev{Kind: workload.EvidenceErrorText, Stage: stDecode}, ev{Kind: workload.EvidenceErrorStatus, Stage: stEdge},
			ev{Kind: workload.EvidenceErrorText, Stage: stBill})
	}
	return out
}

// truth fills the ground truth of a request that incident sc hit: it failed,
// why, where it shows, and whether it is silent.
func (g *Generator) truth(b *build, sc workload.Scenario, dec decode) {
	inc, ok := g.incidents[sc]
	if !ok {
		return
	}
	tr := &b.r.Truth
	tr.Failed = true
	tr.RootCause = &workload.Cause{Kind: workload.CauseAttribute, Attribute: inc.attribute, Value: inc.value}
	tr.Evidence = slices.Clone(inc.evidence) // the request is the caller's to keep
	if sc == KVThrash {
		tr.Evidence = append(tr.Evidence, thrashEvidence(dec)...)
	}
	tr.Silent = true
	for _, e := range tr.Evidence {
		switch e.Kind {
		case workload.EvidenceLatency, workload.EvidenceValue, workload.EvidenceMissingField:
		default:
			tr.Silent = false
		}
	}
}
