package foundry

import (
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// guardLines are aegis-guard's log4j lines on stdout: the level only in the
// body, the req_id in the MDC prefix. Rarely a handled timeout prints its
// stack trace, one record a line, none of them with the req_id.
func (g *Generator) guardLines(b *build, at time.Duration, flagged bool, grade string, score float64) {
	tx, svc := &g.text, g.topo.guard
	if g.chance(guardTraceShare) {
		b.log(svc, at, unset, trace.SpanContext{}, tx.log4j(b.start.Add(at), "grpc-exec-4", "WARN", "c.f.aegis.RuleCache").
			s("[").s(b.id).s("] rule refresh failed, serving cached rules").String())
		for i, line := range ruleCacheTrace {
			b.log(svc, at+time.Duration(i+1)*time.Microsecond, unset, trace.SpanContext{}, line)
		}
	}
	if g.chance(0.7) {
		b.log(svc, at, unset, trace.SpanContext{}, tx.log4j(b.start.Add(at), "grpc-exec-"+strconv.Itoa(1+g.rng.IntN(8)), "INFO", "c.f.aegis.Moderator").
			s("[").s(b.id).s("] verdict=allow flagged=").s(boolText(flagged)).s(" grade=").s(grade).s(" score=").f(score, 2).String())
	}
}

var ruleCacheTrace = []string{
	"java.net.SocketTimeoutException: Read timed out",
	"\tat java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:288)",
	"\tat com.foundry.aegis.rules.RuleClient.fetch(RuleClient.java:117)",
	"\tat com.foundry.aegis.rules.RuleCache.refresh(RuleCache.java:64)",
}

func boolText(v bool) string {
	if v {
		return "true"
	}
	return "false"
}

// persist is quill-writer's async write of the answer, in a trace of its own.
// Its lines are plain text with the req_id in them; the level, when there is
// one, is a word of the text. A write to the read-only shard (LateWrite) is
// accepted, and fails seconds later in the flusher.
func (g *Generator) persist(b *build, at, dur time.Duration, shard string, bytes int64, readOnly bool, lateBy time.Duration) {
	tx, svc := &g.text, g.topo.writer
	sc := b.span(svc, "quill.persist", stPersist, trace.SpanKindConsumer, trace.SpanContext{}, at, at+dur,
		attribute.String("requestId", b.id), attribute.String("store.shard", shard), attribute.Int64("store.bytes", bytes))
	if readOnly || g.chance(0.5) {
		b.log(svc, at+dur, unset, sc, tx.reset().s("persist queued ").s(b.id).s(" shard=").s(shard).s(" bytes=").i(bytes).String())
	}
	if readOnly {
		b.late(svc, at+dur+lateBy, unset, sc, tx.reset().s("ERROR flush of ").s(b.id).s(" to shard ").s(shard).
			s(" failed: [Errno 30] Read-only file system (attempt 3/3), dropping write").String())
	}
}

// bill is tollbooth's usage metering, in a trace of its own. An aborted
// request has no completion to bill: its usage record is rejected with a
// stack trace, printed a line a record.
func (g *Generator) bill(b *build, at, dur time.Duration, tenant string, in, out int, aborted bool) {
	tx, svc := &g.text, g.topo.biller
	b.span(svc, "tollbooth.Record", stBill, trace.SpanKindConsumer, trace.SpanContext{}, at, at+dur,
		attribute.String("x-request-id", b.id), attribute.String("acct.id", tenant),
		attribute.Int("gen_ai.usage.input_tokens", in), attribute.Int("gen_ai.usage.output_tokens", out))
	stamp := b.start.Add(at + dur)
	if aborted {
		b.log(svc, at+dur, unset, trace.SpanContext{}, tx.log4j(stamp, "usage-consumer-2", "ERROR", "c.f.tollbooth.UsageRecorder").
			s("[").s(b.id).s("] usage record rejected: completion missing").String())
		for i, line := range usageRejectedTrace {
			b.log(svc, at+dur+time.Duration(i+1)*time.Microsecond, unset, trace.SpanContext{}, line)
		}
		return
	}
	if g.chance(0.5) {
		b.log(svc, at+dur, unset, trace.SpanContext{}, tx.log4j(stamp, "usage-consumer-1", "INFO", "c.f.tollbooth.UsageRecorder").
			s("[").s(b.id).s("] billed acct=").s(tenant).s(" prompt_tokens=").i(int64(in)).s(" completion_tokens=").i(int64(out)).String())
	}
}

var usageRejectedTrace = []string{
	"java.lang.IllegalStateException: completion missing for usage record",
	"\tat com.foundry.tollbooth.UsageRecorder.record(UsageRecorder.java:142)",
	"\tat com.foundry.tollbooth.UsageConsumer.onMessage(UsageConsumer.java:57)",
	"\tat org.apache.kafka.clients.consumer.internals.ConsumerCoordinator.invoke(ConsumerCoordinator.java:322)",
}

// noise adds one line of background chatter that belongs to no request.
func (g *Generator) noise(b *build, at time.Duration) {
	t, tx, stamp := g.topo, &g.text, b.start.Add(at)
	engine := t.mixtral[g.rng.IntN(3)] // replicas no incident touches
	switch g.rng.IntN(5) {
	case 0:
		b.log(engine.svc, at, unset, trace.SpanContext{}, tx.structlog(stamp, "debug", "scheduler step").num("running", int64(1+g.rng.IntN(40))).
			num("waiting", int64(g.rng.IntN(4))).float("kv_usage", g.uniform(0.2, 0.8), 2).end().String())
	case 1:
		// The text key "model:" names no model here.
		b.log(engine.svc, at, unset, trace.SpanContext{}, tx.python(stamp, "kilnserve.metrics", "INFO").s("model: throughput ").
			i(int64(900+g.rng.IntN(1800))).s(" tok/s, ").i(int64(1+g.rng.IntN(40))).s(" running").String())
	case 2:
		tok := t.tok[0]
		b.log(tok, at, pyInfo, trace.SpanContext{}, tx.python(stamp, "lexd.pool", "INFO").s("pool stats: busy=").i(int64(g.rng.IntN(9))).
			s("/").i(lexdPoolWorkers).s(" queue=0").String())
	case 3:
		b.log(t.rag, at, unset, trace.SpanContext{}, tx.logfmt("debug", "segment merge").kv("index", "kb-main").kvi("segments", int64(4+g.rng.IntN(20))).String())
	default:
		edge := t.edge[g.rng.IntN(len(t.edge))]
		b.log(edge, at, goDebug, trace.SpanContext{}, tx.slogJSON(stamp, "DEBUG", "conn pool").num("idle", int64(g.rng.IntN(64))).
			num("in_use", int64(g.rng.IntN(64))).end().String())
	}
}
