package foundry

import (
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/workload"
)

// Healthy shares of the categorical attributes: every value is common enough
// that a detector which keeps each minority value keeps a large share of
// healthy traffic.
var (
	lanes     = []option{{"interactive", .40}, {"batch", .25}, {"priority", .20}, {"eval", .15}}
	templates = []option{{"chat@r7", .40}, {"qa@r19", .25}, {"summarize@r4", .20}, {"extract@r2", .15}}
	finishes  = []option{{"stop", .70}, {"length", .22}, {"tool_calls", .08}}
	grades    = []option{{"excellent", .35}, {"good", .40}, {"fair", .25}}
	adapters  = []option{{"adp-support-v2", .40}, {"adp-sql-v7", .35}, {"adp-legal-v5", .25}}
	shards    = []option{{"rs-00", 1}, {"rs-01", 1}, {"rs-02", 1}, {"rs-03", 1}, {"rs-04", 1}, {"rs-05", 1}, {"rs-06", 1}, {"rs-07", 1}}
	tenants   = func() []string {
		out := make([]string, 30)
		for i := range out {
			out[i] = "acct-" + strconv.Itoa(4100+17*i)
		}
		return out
	}()
)

const (
	chatRoute  = "/v1/chat/completions"
	imageRoute = "/v1/images/generations"

	phiShare        = 0.30 // of chat requests go to the small model
	adapterShare    = 0.30 // of the large model's requests name a LoRA adapter
	adapterMiss     = 0.02 // of those miss the adapter cache on healthy traffic (a short load from local disk)
	ragShare        = 0.45 // of chat requests retrieve context first
	prefixMissShare = 0.35 // of prefills miss the prefix cache on healthy traffic
	flaggedShare    = 0.07 // of answers the moderation flags and lets through
	retryShare      = 0.03 // of requests retry the tokenizer once
	guardTraceShare = 0.005
	noiseShare      = 0.6
	maxNewTokens    = 256
	// slowUpstream is the edge time above which the edge logs a warning.
	slowUpstream = 2500 * time.Millisecond

	staleTemplate = "qa@r12"       // StaleTemplate
	coldAdapter   = "adp-legal-v5" // LoraCold
	readOnlyShard = "rs-07"        // LateWrite
)

// unless is value while incident sc has started, else "": the value that
// healthy requests stop drawing then.
func (g *Generator) unless(sc workload.Scenario, value string) string {
	if g.active(sc) {
		return value
	}
	return ""
}

// textEngine routes a chat request: each engine incident to its replica,
// healthy traffic to the replicas no started incident has broken.
func (g *Generator) textEngine(sc workload.Scenario) *engine {
	t := g.topo
	switch sc {
	case FieldDrop:
		return t.upgraded
	case GPUOOM:
		return t.mixtral[3]
	case KVThrash:
		return t.mixtral[4]
	}
	if sc == workload.Healthy && g.chance(phiShare) {
		if g.active(FieldDrop) {
			return t.phi[0] // phi[1] was replaced by the upgraded instance
		}
		return t.phi[g.rng.IntN(len(t.phi))]
	}
	healthy := make([]*engine, 0, len(t.mixtral))
	for i, e := range t.mixtral {
		if i == 3 && g.active(GPUOOM) || i == 4 && g.active(KVThrash) {
			continue
		}
		healthy = append(healthy, e)
	}
	return healthy[g.rng.IntN(len(healthy))]
}

func (g *Generator) tokenizer(sc workload.Scenario) *workload.Service {
	t := g.topo
	if sc == TokPool {
		return t.tok[1]
	}
	if g.active(TokPool) {
		return []*workload.Service{t.tok[0], t.tok[2]}[g.rng.IntN(2)]
	}
	return t.tok[g.rng.IntN(len(t.tok))]
}

// decode is what the engine's generation of one answer costs.
type decode struct {
	dur         time.Duration
	outTokens   int
	finish      string
	preemptions int64
	evicted     int64
	aborted     bool // KVThrash: given up after too many preemptions
	oom         bool // GPUOOM: the card ran out of memory mid-answer
}

func (g *Generator) decode(sc workload.Scenario, eng *engine) decode {
	d := decode{finish: g.choose(finishes, "")}
	switch d.finish {
	case "length":
		d.outTokens = maxNewTokens
	case "tool_calls":
		d.outTokens = 20 + g.rng.IntN(41)
	default:
		d.outTokens = 40 + g.rng.IntN(181)
	}
	perToken := g.uniform(3.5, 4.5)
	if eng.model != mixtralServed {
		perToken = g.uniform(2.5, 3.2)
	}
	switch u := g.rng.Float64(); {
	case u < 0.01:
		d.preemptions, d.evicted = 2, int64(60+g.rng.IntN(61))
	case u < 0.08:
		d.preemptions, d.evicted = 1, int64(20+g.rng.IntN(41))
	default:
		d.evicted = int64(g.rng.IntN(8))
	}
	var recompute time.Duration // a preempted sequence recomputes its prefix when it is resumed
	switch sc {
	case KVThrash:
		d.preemptions, d.evicted = int64(6+g.rng.IntN(20)), int64(800+g.rng.IntN(3201))
		perToken *= g.uniform(1.5, 2.5) // smaller batches of evicted blocks
		recompute = ms(float64(d.preemptions) * g.uniform(40, 120))
		if g.chance(0.4) {
			d.aborted, d.finish = true, "abort"
			d.outTokens = max(1, int(float64(d.outTokens)*g.uniform(0.3, 0.8)))
		}
	case GPUOOM:
		d.oom, d.finish = true, "error"
		d.outTokens = max(1, int(float64(d.outTokens)*g.uniform(0.1, 0.6)))
	}
	d.dur = ms(float64(d.outTokens)*perToken) + recompute
	return d
}

// chatRequest models a chat completion: frontdoor → switchyard (template,
// lexd, vecfind, kilnserve) → aegis-guard → respstore, then quill-writer and
// tollbooth in traces of their own.
func (g *Generator) chatRequest(end time.Time, sc workload.Scenario) *workload.Request {
	rng, t, tx := g.rng, g.topo, &g.text
	p := g.chats[rng.IntN(len(g.chats))]
	eng := g.textEngine(sc)
	edge, tok := t.edge[rng.IntN(len(t.edge))], g.tokenizer(sc)
	tenant, lane := tenants[rng.IntN(len(tenants))], g.choose(lanes, "")
	template := g.choose(templates, "")
	if sc == StaleTemplate {
		template = staleTemplate
	}
	adapter, adapterCache := "", "hit"
	if sc == LoraCold {
		adapter, adapterCache = coldAdapter, "miss"
	} else if eng.model == mixtralServed && g.chance(adapterShare) {
		adapter = g.choose(adapters, g.unless(LoraCold, coldAdapter))
		if g.chance(adapterMiss) {
			adapterCache = "miss"
		}
	}
	shard := g.choose(shards, g.unless(LateWrite, readOnlyShard))
	if sc == LateWrite {
		shard = readOnlyShard
	}

	// Every duration is drawn before anything is placed: the req_id embeds
	// the start time, which depends on all of them.
	routeDur, tmplDur := ms(g.uniform(0.4, 1.2)), ms(g.uniform(0.2, 0.8))
	tokDur, busy, queued := ms(g.normal(5, 1, 2.5, 9)), int64(1+rng.IntN(9)), int64(rng.IntN(3))
	if sc == TokPool {
		tokDur, busy, queued = ms(g.normal(310, 40, 220, 420)), lexdPoolWorkers, int64(20+rng.IntN(41))
	}
	var backoff time.Duration
	if g.chance(retryShare) {
		backoff = ms(g.uniform(20, 60))
	}
	withRAG := g.chance(ragShare)
	embedDur, lookupDur, hits := ms(g.uniform(6, 14)), ms(g.uniform(4, 20)), int64(rng.IntN(9))
	var adapterDur time.Duration
	switch {
	case sc == LoraCold:
		adapterDur = ms(g.uniform(2500, 6000))
	case adapterCache == "miss":
		adapterDur = ms(g.uniform(150, 400))
	default:
		adapterDur = ms(g.uniform(0.1, 0.4))
	}
	prefixCache, prefillDur := "hit", ms(g.uniform(12, 40))
	if g.chance(prefixMissShare) {
		prefixCache, prefillDur = "miss", ms(g.uniform(40, 120))
	}
	dec := g.decode(sc, eng)
	batch := int64(8 + rng.IntN(41))
	failedMidway := dec.aborted || dec.oom // no answer to moderate, store or persist
	flagged, grade := g.chance(flaggedShare), g.choose(grades, "")
	if sc == StaleTemplate {
		grade = "poor"
	}
	score := gradeScore(g, grade)
	guardDur, storeDur := ms(g.uniform(6, 18)), ms(g.uniform(2, 6))
	persistWait, persistDur := ms(g.uniform(15, 120)), ms(g.uniform(5, 25))
	billWait, billDur := ms(g.uniform(100, 900)), ms(g.uniform(2, 8))
	lateBy := ms(g.uniform(3000, 9000))

	routeAt := hop
	tmplAt := routeAt + ms(0.1)
	tokAt := tmplAt + tmplDur + routeDur + backoff
	tokEnd := tokAt + tokDur
	genAt := tokEnd + hop
	embedAt, lookupAt := genAt, genAt+embedDur
	if withRAG {
		genAt = lookupAt + lookupDur + hop
	}
	prefillAt := genAt
	if adapter != "" {
		prefillAt += adapterDur
	}
	decodeAt := prefillAt + prefillDur
	genEnd := decodeAt + dec.dur
	routeEnd := genEnd + hop/2
	guardAt := routeEnd + hop
	storeAt := guardAt + guardDur + hop
	storeEnd := storeAt + storeDur
	edgeEnd := storeEnd + hop
	if failedMidway {
		edgeEnd = routeEnd + hop
	}
	persistAt := storeEnd + persistWait
	billAt := edgeEnd + billWait
	total := max(edgeEnd, billAt+billDur)
	if !failedMidway {
		total = max(total, persistAt+persistDur)
	}
	start := end.Add(-total)
	b := g.newBuild(start, end, sc)
	id := b.id
	b.r.Truth.InputHash, b.r.Truth.ModelVer, b.r.Truth.Host = p.hash, eng.model, eng.svc.Host

	status := int64(200)
	if dec.aborted {
		status = 503
	}
	root := b.span(edge, "POST "+chatRoute, stEdge, trace.SpanKindServer, trace.SpanContext{}, 0, edgeEnd,
		attribute.String("x-request-id", id), attribute.String("http.request.method", "POST"), attribute.String("http.route", chatRoute),
		attribute.Int64("http.response.status_code", status), attribute.String("gen_ai.request.model", eng.asked),
		attribute.String("gen_ai.prompt", p.text), attribute.String("acct.id", tenant))
	if dec.aborted {
		b.lastSpan().Error = "upstream aborted the request"
	}
	b.log(edge, hop/2, goInfo, root, tx.slogJSON(start.Add(hop/2), "INFO", "request accepted").str("requestId", id).
		str("route", chatRoute).str("acct", tenant).str("lane", lane).end().String())

	route := b.span(t.router, "switchyard.Route", stRoute, trace.SpanKindInternal, root, routeAt, routeEnd,
		attribute.String("orch.lane", lane), attribute.String("orch.target", eng.svc.Instance))
	b.span(t.router, "switchyard.RenderTemplate", stTemplate, trace.SpanKindInternal, route, tmplAt, tmplAt+tmplDur,
		attribute.String("orch.template", template))
	if g.chance(0.8) {
		at := tmplAt + tmplDur
		b.log(t.router, at, unset, trace.SpanContext{}, tx.slogText(start.Add(at), "INFO", "routed").kv("x-request-id", id).
			kv("lane", lane).kv("model", eng.asked).kv("target", eng.svc.Instance).kv("template", template).String())
	}
	if backoff > 0 { // a healthy retry: the first attempt hit a restarting replica
		at := tokAt - backoff
		b.log(t.router, at, unset, trace.SpanContext{}, tx.slogText(start.Add(at), "WARN", "tokenizer call failed, retrying").
			kv("x-request-id", id).kvi("attempt", 1).kv("err", "rpc error: code = Unavailable desc = connection reset by peer").String())
	}

	tokSpan := b.span(tok, "lexd.Encode", stTokenize, trace.SpanKindServer, route, tokAt, tokEnd,
		attribute.Int("tok.count", p.tokens), attribute.Int64("tok.pool_busy", busy), attribute.Int64("tok.queue_depth", queued))
	switch at := tokEnd - hop/2; {
	case sc == TokPool:
		b.log(tok, at, pyWarn, tokSpan, tx.python(start.Add(at), "lexd.pool", "WARNING").s("worker pool saturated: ").i(busy).
			s("/").i(lexdPoolWorkers).s(" busy, ").i(queued).s(" queued, waited ").i((tokDur - ms(5)).Milliseconds()).s(" ms").String())
	case g.chance(0.5):
		b.log(tok, at, pyInfo, tokSpan, tx.python(start.Add(at), "lexd.encode", "INFO").s("encoded ").i(int64(p.tokens)).
			s(" tokens in ").f(millis(tokDur), 1).s(" ms (pool ").i(busy).s("/").i(lexdPoolWorkers).s(" busy)").String())
	}

	if withRAG {
		b.span(t.rag, "vecfind.Embed", stEmbed, trace.SpanKindServer, route, embedAt, embedAt+embedDur, attribute.Int("rag.dim", 384))
		lookup := b.span(t.rag, "vecfind.Lookup", stLookup, trace.SpanKindServer, route, lookupAt, lookupAt+lookupDur,
			attribute.Int("rag.top_k", 8), attribute.Int64("rag.hits", hits))
		if g.chance(0.6) {
			b.log(t.rag, lookupAt+lookupDur, unset, lookup, tx.logfmt("info", "lookup done").kv("index", "kb-main").kvi("hits", hits).
				kvi("took_ms", lookupDur.Milliseconds()).String())
		}
	}

	engAttrs := func(more ...attribute.KeyValue) []attribute.KeyValue {
		return append([]attribute.KeyValue{attribute.String("llm.request_id", id), attribute.String("llm.model_name", eng.model),
			attribute.String("accel.uuid", eng.gpu)}, more...)
	}
	if adapter != "" {
		b.span(eng.svc, "kilnserve.load_adapter", stAdapter, trace.SpanKindInternal, route, genAt, prefillAt,
			engAttrs(attribute.String("lora.adapter_id", adapter), attribute.String("lora.cache", adapterCache))...)
		if adapterCache == "miss" {
			source := "local-nvme"
			if sc == LoraCold {
				source = "s3://adapters"
			}
			b.log(eng.svc, prefillAt, unset, trace.SpanContext{}, tx.structlog(start.Add(prefillAt), "info", "adapter loaded").
				str("llm.request_id", id).str("lora.adapter_id", adapter).str("lora.cache", "miss").str("source", source).
				num("load_ms", adapterDur.Milliseconds()).end().String())
		}
	}
	b.span(eng.svc, "kilnserve.prefill", stPrefill, trace.SpanKindInternal, route, prefillAt, decodeAt,
		engAttrs(attribute.Int("gen_ai.usage.input_tokens", p.tokens), attribute.String("prefix_cache", prefixCache))...)
	segments := 1 + int64(dec.outTokens)/24
	decAttrs := engAttrs(attribute.Int("gen_ai.usage.output_tokens", dec.outTokens), attribute.String("gen_ai.response.finish_reasons", dec.finish),
		attribute.Int64("kv.preemptions", dec.preemptions), attribute.Int64("kv.evicted_blocks", dec.evicted), attribute.Int64("sched.batch_size", batch))
	if eng.model != phiUpgraded && !failedMidway {
		decAttrs = append(decAttrs, attribute.String("resp.segment_map", segmentMap(segments, dec.outTokens)))
	}
	b.span(eng.svc, "kilnserve.decode", stDecode, trace.SpanKindInternal, route, decodeAt, genEnd, decAttrs...)
	switch {
	case dec.oom:
		g.outOfMemory(b, eng, genEnd)
	case dec.aborted:
		g.abortThrashed(b, eng, decodeAt, genEnd, dec)
	default:
		tx.structlog(start.Add(genEnd), "info", "request finished").str("stage", stDecode).str("llm.request_id", id).
			str("model", eng.model).str("accel.uuid", eng.gpu).num("prompt_tokens", int64(p.tokens)).
			num("completion_tokens", int64(dec.outTokens)).num("kv.preemptions", dec.preemptions).str("finish_reason", dec.finish)
		if eng.model != phiUpgraded {
			tx.str("resp.segment_map", segmentMap(segments, dec.outTokens))
		}
		b.log(eng.svc, genEnd, unset, trace.SpanContext{}, tx.end().String())
	}

	if !failedMidway {
		b.span(t.guard, "aegis.Moderate", stGuard, trace.SpanKindServer, root, guardAt, guardAt+guardDur,
			attribute.Bool("guard.flagged", flagged), attribute.String("judge.grade", grade), attribute.Float64("judge.score", score))
		g.guardLines(b, guardAt+guardDur, flagged, grade, score)

		stored, bytes := segments, int64(dec.outTokens)*int64(60+rng.IntN(40))
		if eng.model == phiUpgraded { // without the segment map every segment is judged a duplicate
			stored, bytes = 0, 0
		}
		store := b.span(t.store, "respstore.Put", stStore, trace.SpanKindServer, root, storeAt, storeEnd,
			attribute.Int64("segments_stored", stored), attribute.Int64("store.bytes", bytes))
		if g.chance(0.6) {
			b.log(t.store, storeEnd, goInfo, store, tx.reset().s("put ok key=res/").s(id).s(" segments=").i(stored).s(" bytes=").i(bytes).String())
		}
		g.persist(b, persistAt, persistDur, shard, bytes, sc == LateWrite, lateBy)
	}

	switch {
	case edgeEnd > slowUpstream:
		b.log(edge, edgeEnd, goWarn, root, tx.slogJSON(start.Add(edgeEnd), "WARN", "slow upstream").str("requestId", id).
			num("status", status).num("duration_ms", edgeEnd.Milliseconds()).end().String())
	case dec.oom: // the stream had started: the client got an error event inside a 200
		b.log(edge, edgeEnd, goWarn, root, tx.slogJSON(start.Add(edgeEnd), "WARN", "stream closed early").str("requestId", id).
			num("status", status).num("duration_ms", edgeEnd.Milliseconds()).end().String())
	case g.chance(0.6):
		b.log(edge, edgeEnd, goInfo, root, tx.slogJSON(start.Add(edgeEnd), "INFO", "request served").str("requestId", id).
			num("status", status).num("duration_ms", edgeEnd.Milliseconds()).end().String())
	}
	g.bill(b, billAt, billDur, tenant, p.tokens, dec.outTokens, dec.aborted)
	if g.chance(noiseShare) {
		g.noise(b, ms(g.uniform(0, millis(total))))
	}
	g.truth(b, sc, dec)
	return b.r
}

func gradeScore(g *Generator, grade string) float64 {
	switch grade {
	case "excellent":
		return round2(g.uniform(0.85, 0.98))
	case "good":
		return round2(g.uniform(0.70, 0.85))
	case "fair":
		return round2(g.uniform(0.50, 0.70))
	}
	return round2(g.uniform(0.05, 0.25))
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

// segmentMap is the engine's map of answer segments, "0-24,24-48,…".
func segmentMap(segments int64, tokens int) string {
	var b []byte
	for i := range segments {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, i*24, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, min((i+1)*24, int64(tokens)), 10)
	}
	return string(b)
}
