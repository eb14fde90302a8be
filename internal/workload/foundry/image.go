package foundry

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/workload"
)

var presets = []option{{"quality", .55}, {"balanced", .30}, {"fast", .15}}

const (
	nsfwShare    = 0.04
	healthyDType = "bfloat16"
	blackDType   = "float16" // BlackImages: the fast preset's VAE after the rollout
	blackPreset  = "fast"
)

// presetSteps are the denoising steps of each preset and the time of one step.
var presetSteps = map[string]struct {
	steps  int64
	lo, hi float64 // ms per step
}{"quality": {25, 48, 60}, "balanced": {8, 60, 75}, "fast": {4, 60, 90}}

// imageRequest models an image generation: frontdoor → switchyard
// (aegis-guard's prompt check, lumenpix denoise and VAE decode) → respstore,
// then quill-writer and tollbooth in traces of their own.
func (g *Generator) imageRequest(end time.Time, sc workload.Scenario) *workload.Request {
	rng, t, tx := g.rng, g.topo, &g.text
	p := g.images[rng.IntN(len(g.images))]
	eng := t.image[rng.IntN(len(t.image))]
	edge, tenant := t.edge[rng.IntN(len(t.edge))], tenants[rng.IntN(len(tenants))]
	preset, dtype := g.choose(presets, g.unless(BlackImages, blackPreset)), healthyDType
	if sc == BlackImages {
		preset, dtype = blackPreset, blackDType
	}
	shard := g.choose(shards, g.unless(LateWrite, readOnlyShard))

	routeDur, guardDur := ms(g.uniform(0.4, 1.2)), ms(g.uniform(4, 10))
	steps := presetSteps[preset]
	denoiseDur := ms(float64(steps.steps) * g.uniform(steps.lo, steps.hi))
	vaeDur := ms(g.uniform(40, 90))
	nsfw, luma := g.chance(nsfwShare), round2(g.uniform(0.22, 0.68))
	bytes := int64(1_200_000 + rng.IntN(1_300_000))
	if nsfw { // blurred, never blank
		luma = round2(g.uniform(0.28, 0.36))
	}
	blank := dtype == blackDType // the float16 VAE overflows to an all-black image
	if blank {
		luma, bytes = 0, int64(3000+rng.IntN(3000))
	}
	storeDur := ms(g.uniform(4, 12))
	persistWait, persistDur := ms(g.uniform(15, 120)), ms(g.uniform(8, 40))
	billWait, billDur := ms(g.uniform(100, 900)), ms(g.uniform(2, 8))

	routeAt := hop
	guardAt := routeAt + routeDur
	denoiseAt := guardAt + guardDur + hop
	vaeAt := denoiseAt + denoiseDur
	routeEnd := vaeAt + vaeDur + hop/2
	storeAt := routeEnd + hop
	storeEnd := storeAt + storeDur
	edgeEnd := storeEnd + hop
	persistAt, billAt := storeEnd+persistWait, edgeEnd+billWait
	total := max(edgeEnd, persistAt+persistDur, billAt+billDur)
	start := end.Add(-total)
	b := g.newBuild(start, end, sc)
	id := b.id
	b.r.Truth.InputHash, b.r.Truth.ModelVer, b.r.Truth.Host = p.hash, eng.model, eng.svc.Host

	root := b.span(edge, "POST "+imageRoute, stEdge, trace.SpanKindServer, trace.SpanContext{}, 0, edgeEnd,
		attribute.String("x-request-id", id), attribute.String("http.request.method", "POST"), attribute.String("http.route", imageRoute),
		attribute.Int64("http.response.status_code", 200), attribute.String("gen_ai.request.model", eng.asked),
		attribute.String("gen_ai.prompt", p.text), attribute.String("acct.id", tenant))
	b.log(edge, hop/2, goInfo, root, tx.slogJSON(start.Add(hop/2), "INFO", "request accepted").str("requestId", id).
		str("route", imageRoute).str("acct", tenant).str("preset", preset).end().String())
	route := b.span(t.router, "switchyard.Route", stRoute, trace.SpanKindInternal, root, routeAt, routeEnd,
		attribute.String("orch.lane", "interactive"), attribute.String("orch.target", eng.svc.Instance))
	b.span(t.guard, "aegis.CheckPrompt", stGuard, trace.SpanKindServer, route, guardAt, guardAt+guardDur,
		attribute.Bool("guard.flagged", false))

	engAttrs := func(more ...attribute.KeyValue) []attribute.KeyValue {
		return append([]attribute.KeyValue{attribute.String("llm.request_id", id), attribute.String("llm.model_name", eng.model),
			attribute.String("accel.uuid", eng.gpu)}, more...)
	}
	b.span(eng.svc, "lumenpix.denoise", stDenoise, trace.SpanKindInternal, route, denoiseAt, vaeAt,
		engAttrs(attribute.String("img.preset", preset), attribute.Int64("img.steps", steps.steps))...)
	vae := b.span(eng.svc, "lumenpix.vae_decode", stVAE, trace.SpanKindInternal, route, vaeAt, vaeAt+vaeDur,
		engAttrs(attribute.String("img.vae_dtype", dtype), attribute.Float64("img.mean_luma", luma), attribute.Bool("img.blank", blank),
			attribute.Bool("img.nsfw_filtered", nsfw))...)
	if g.chance(0.8) {
		at := vaeAt + vaeDur
		b.log(eng.svc, at, pyInfo, vae, tx.python(start.Add(at), "lumenpix.pipeline", "INFO").s("[").s(id).s("] decoded 1024x1024 preset=").
			s(preset).s(" steps=").i(steps.steps).s(" mean_luma=").f(luma, 3).s(" nsfw_filtered=").s(pythonBool(nsfw)).String())
	}

	store := b.span(t.store, "respstore.Put", stStore, trace.SpanKindServer, root, storeAt, storeEnd,
		attribute.Int64("segments_stored", 1), attribute.Int64("store.bytes", bytes))
	if g.chance(0.6) {
		b.log(t.store, storeEnd, goInfo, store, tx.reset().s("put ok key=img/").s(id).s(" segments=1 bytes=").i(bytes).String())
	}
	g.persist(b, persistAt, persistDur, shard, bytes, false, 0)
	if g.chance(0.6) {
		b.log(edge, edgeEnd, goInfo, root, tx.slogJSON(start.Add(edgeEnd), "INFO", "request served").str("requestId", id).
			num("status", 200).num("duration_ms", edgeEnd.Milliseconds()).end().String())
	}
	g.bill(b, billAt, billDur, tenant, p.tokens, 0, false)
	if g.chance(noiseShare) {
		g.noise(b, ms(g.uniform(0, millis(total))))
	}
	g.truth(b, sc, decode{})
	return b.r
}

func pythonBool(v bool) string {
	if v {
		return "True"
	}
	return "False"
}
