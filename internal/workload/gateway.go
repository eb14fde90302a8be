package workload

import (
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/golden"
)

const (
	chatRoute = "/v1/chat/completions"
	// slowRequest is the gateway latency above which it logs a warning.
	slowRequest = 2 * time.Second
)

var tenants = func() []string {
	out := make([]string, 24)
	for i := range out {
		out[i] = "t-" + strconv.Itoa(101+i)
	}
	return out
}()

// gatewayRequest models an online request: gateway → auth → preproc → model →
// postproc → cache, then async workers in traces of their own.
func (g *Generator) gatewayRequest(end time.Time, sc Scenario) *Request {
	rng, t := g.rng, g.topo
	p := g.prompts[rng.IntN(len(g.prompts))]
	if sc == S2 {
		p = g.slow[rng.IntN(len(g.slow))]
	}
	var fate hotFate
	if sc == HotInputs {
		p, fate = g.hotInput(p)
	}
	engine := g.engine(sc)
	gw, pre := t.gateway[rng.IntN(len(t.gateway))], t.preproc[rng.IntN(len(t.preproc))]
	tenant := tenants[rng.IntN(len(tenants))]

	// Every duration is drawn before anything is placed: the req_id embeds
	// the start time, which depends on all of them.
	authDur := ms(g.uniform(0.8, 2.5))
	normDur := ms(g.normal(5, 0.8, 2, 9))
	var codeDur time.Duration
	if p.code {
		codeDur = ms(g.uniform(2, 6))
	}
	fwd := g.forward(sc, p)
	postDur := ms(g.normal(8, 1.5, 3, 14))
	cacheDur := ms(g.uniform(0.5, 2))
	vecWait, vecDur := ms(g.uniform(5, 40)), ms(g.uniform(3, 15))
	auditWait, auditDur := ms(g.uniform(10, 80)), ms(g.uniform(1, 5))
	analyticsWait, analyticsDur := ms(g.uniform(50, 500)), ms(g.uniform(2, 10))
	withAudit, withAnalytics := rng.Float64() < 0.15, rng.Float64() < 0.10

	authAt := hop
	normAt := authAt + authDur + hop
	normEnd := normAt + normDur + codeDur
	fwdAt := normEnd + 2*hop
	fwdEnd := fwdAt + fwd.latency
	postAt := fwdEnd + hop
	cacheAt := postAt + postDur + hop
	cacheEnd := cacheAt + cacheDur
	gwEnd := cacheEnd + hop
	total := max(gwEnd, cacheEnd+vecWait+vecDur)
	if withAudit {
		total = max(total, cacheEnd+auditWait+auditDur)
	}
	if withAnalytics {
		total = max(total, gwEnd+analyticsWait+analyticsDur)
	}
	start := end.Add(-total)
	b := g.newBuild(start, total, golden.NewReqID(start, rng), sc)
	id := b.reqID
	b.r.Truth.InputHash, b.r.Truth.ModelVer, b.r.Truth.Host = p.hash, engine.Version, engine.Host
	l := &g.line

	root := b.span(gw, "POST "+chatRoute, "gateway/request", trace.SpanKindServer, trace.SpanContext{}, 0, gwEnd,
		attribute.String("http.request.method", "POST"), attribute.String("http.route", chatRoute),
		attribute.Int("http.response.status_code", 200), attribute.String("gen_ai.request.model", engine.Version), latency(gwEnd))
	l.reset().text("{").jsonStr("level", "info").jsonStr("caller", "server/handler.go:88").jsonStr("msg", "received request").
		jsonStr("request_id", id).jsonStr("method", "POST").jsonStr("path", chatRoute).jsonStr("tenant", tenant)
	if rng.Float64() < 0.03 { // debug logging left on: the raw prompt leaks into the log
		l.jsonStr("prompt", p.text)
	}
	b.log(gw, hop/2, goInfo, root, l.text("}").String())

	authSpan := b.span(t.auth, "auth/verify", "auth/verify", trace.SpanKindServer, root, authAt, authAt+authDur, latency(authDur))
	if rng.Float64() < 0.5 {
		b.log(t.auth, authAt+authDur/2, goDebug, authSpan, l.reset().kv("level", "debug").kv("msg", "token verified").
			kv("x_request_id", id).kv("tenant", tenant).kv("scopes", "completions").String())
	}

	norm := b.span(pre, "preproc/normalize", "preproc/normalize", trace.SpanKindServer, root, normAt, normEnd,
		attribute.String("llm.model_name", engine.Version), attribute.Int(golden.Tokens, p.tokens), latency(normEnd-normAt))
	if p.code {
		b.span(t.analyzer, "code_syntax_analyzer/parse", "code_syntax_analyzer/parse", trace.SpanKindServer, norm,
			normAt+normDur/2, normAt+normDur/2+codeDur, attribute.String("code.language", "python"), latency(codeDur))
	}
	b.log(pre, normEnd-hop, pyInfo, norm, l.reset().text("[").text(id).text("] normalized input tokens=").int(int64(p.tokens)).String())
	if rng.Float64() < 0.01 { // a handled error: a red herring, the request still succeeds
		b.log(pre, normAt+normDur/2, pyWarn, norm, l.reset().text("[").text(id).text("] tokenizer cache lookup failed, falling back to local tokenizer\n").
			text(tokenizerTraceback).String())
	}

	b.span(engine, "model/forward", "model/forward", trace.SpanKindServer, root, fwdAt, fwdEnd, fwd.attrs(engine.Version)...)
	// The engine's internals log outside the request's trace context.
	l.reset().text("{").jsonStr("level", "INFO").jsonStr("logger", "engine.forward").jsonStr("msg", "forward done").
		jsonStr(golden.Stage, "model/forward").jsonStr(golden.ReqID, id).jsonStr("model_name", engine.Version).
		jsonStr(golden.InputHash, p.hash).jsonInt("duration_ms", fwd.latency.Milliseconds()).jsonInt("input_tokens", int64(fwd.inTokens)).
		jsonInt("output_tokens", int64(fwd.outTokens)).jsonInt("gpu_mem_mb", fwd.gpuMemMb)
	if engine.Version != upgradedModel {
		l.jsonStr("raw_output_hash", fwd.outputHash)
	}
	b.log(engine, fwdEnd, pyInfo, trace.SpanContext{}, l.text("}").String())

	// Dedup keys on raw_output_hash: without it every output looks like a duplicate (S1).
	outLen, reason := int64(fwd.outTokens*4), "none"
	if engine.Version == upgradedModel {
		outLen, reason = 0, "empty_after_dedup"
	}
	post := b.span(t.postproc, "postproc/filter", "postproc/filter", trace.SpanKindServer, root, postAt, postAt+postDur,
		attribute.Int64("output_length", outLen), attribute.String("filter_reason", reason), latency(postDur))
	b.log(t.postproc, postAt+postDur-hop, goInfo, post, l.reset().kv("level", "info").kv(golden.Stage, "postproc/filter").
		kv(golden.ReqID, id).kv(golden.ModelVer, engine.Version).kv(golden.InputHash, p.hash).kvInt("output_length", outLen).
		kv("filter_reason", reason).kvFloat("duration_ms", round1(float64(postDur)/float64(time.Millisecond)), 1).String())

	cache := b.span(t.cache, "cache/write", "cache/write", trace.SpanKindServer, root, cacheAt, cacheEnd, latency(cacheDur))
	if rng.Float64() < 0.5 {
		b.log(t.cache, cacheEnd, goInfo, cache, l.reset().text("[").text(id).text("] cache write ok key=resp:").text(p.hash).text(" ttl=3600s").String())
	}

	switch {
	case gwEnd > slowRequest:
		b.log(gw, gwEnd, goWarn, root, l.reset().text("{").jsonStr("level", "warn").jsonStr("msg", "slow request").
			jsonStr("request_id", id).jsonInt("status", 200).jsonInt("duration_ms", gwEnd.Milliseconds()).text("}").String())
	case rng.Float64() < 0.5:
		b.log(gw, gwEnd, goInfo, root, l.reset().text("{").jsonStr("level", "info").jsonStr("msg", "request completed").
			jsonStr("request_id", id).jsonInt("status", 200).jsonInt("duration_ms", gwEnd.Milliseconds()).text("}").String())
	}

	// Async workers pick the request up from a queue and start traces of their own.
	vecAt := cacheEnd + vecWait
	vec := b.span(t.vector, "vectorstore/write", "vectorstore/write", trace.SpanKindConsumer, trace.SpanContext{}, vecAt, vecAt+vecDur,
		attribute.String("db.system", "qdrant"), latency(vecDur))
	if rng.Float64() < 0.5 {
		b.log(t.vector, vecAt, pyInfo, vec, l.reset().text("{").jsonStr("level", "INFO").jsonStr("msg", "start processing").
			jsonStr("inference_id", id).jsonStr("collection", "responses").text("}").String())
	}
	if withAudit {
		at := cacheEnd + auditWait
		audit := b.span(t.audit, "audit/record", "audit/record", trace.SpanKindConsumer, trace.SpanContext{}, at, at+auditDur, latency(auditDur))
		b.log(t.audit, at+auditDur, pyInfo, audit, "audit record written",
			attribute.String(golden.ReqID, id), attribute.String(golden.Stage, "audit/record"), attribute.String(golden.InputHash, p.hash),
			attribute.String("model", engine.Version), attribute.Float64("duration_ms", round1(float64(auditDur)/float64(time.Millisecond))))
	}
	if withAnalytics {
		at := gwEnd + analyticsWait
		b.span(t.analytics, "analytics/track", "analytics/track", trace.SpanKindConsumer, trace.SpanContext{}, at, at+analyticsDur, latency(analyticsDur))
	}
	if rng.Float64() < 0.6 {
		b.noise(ms(g.uniform(0, float64(total)/float64(time.Millisecond))))
	}
	if sc == HotInputs {
		b.meet(fate)
	}
	return b.r
}

const tokenizerTraceback = `Traceback (most recent call last):
  File "/app/preproc/tokenize.py", line 88, in encode
    ids = self.cache.get(key)
  File "/usr/lib/python3.11/site-packages/redis/commands/core.py", line 1829, in get
    return self.execute_command("GET", name)
redis.exceptions.TimeoutError: Timeout reading from socket`

// forward is what one model/forward pass costs.
type forward struct {
	latency             time.Duration
	inTokens, outTokens int
	gpuMemMb, smInstr   int64
	outputHash          string
}

func (g *Generator) forward(sc Scenario, p prompt) forward {
	f := forward{
		inTokens:   p.tokens,
		outTokens:  40 + g.rng.IntN(360),
		gpuMemMb:   int64(g.normal(10240, 150, 9500, 11000)),
		outputHash: hex16(g.rng.Uint64()),
	}
	sm := g.normal(2.1e10, 1.5e9, 1.5e10, 2.7e10)
	switch {
	case sc == S2:
		// Dynamic padding of the emoji-expanded input: same memory, about
		// twice the SM instructions, five times the latency.
		f.latency = ms(g.normal(4200, 150, 3600, 4800))
		sm *= 2.05
	case g.rng.Float64() < 0.25:
		f.latency = ms(g.uniform(120, 700))
	default:
		f.latency = ms(g.normal(820, 40, 700, 900))
	}
	f.smInstr = int64(sm)
	return f
}

// attrs are the model/forward span attributes; v2.3.2 no longer writes raw_output_hash (S1).
func (f forward) attrs(modelVer string) []attribute.KeyValue {
	kv := []attribute.KeyValue{
		attribute.String(golden.ModelVer, modelVer),
		attribute.String("gen_ai.request.model", modelVer),
		attribute.Int(golden.GenAIInputTokens, f.inTokens),
		attribute.Int(golden.GenAIOutputTokens, f.outTokens),
		attribute.Int(golden.Tokens, f.inTokens),
		latency(f.latency),
		attribute.Int64(golden.GPUMemMb, f.gpuMemMb),
		attribute.Int64(golden.SMInstructions, f.smInstr),
	}
	if modelVer != upgradedModel {
		kv = append(kv, attribute.String("raw_output_hash", f.outputHash))
	}
	return kv
}
