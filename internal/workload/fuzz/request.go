package fuzz

import (
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/workload"
)

// hop is the network time between two services.
const hop = 300 * time.Microsecond

// visit is one service's part in a request, planned before anything is
// written: the request id embeds the start, which depends on every duration.
type visit struct {
	s          *service
	inst       int
	start, end time.Duration // from the request's start
	children   []*visit
	faulty     bool
}

// Next models the next request, placed so that it ends at end.
func (g *Generator) Next(end time.Time) *workload.Request {
	i := g.n
	g.n++
	if i == g.deployAt {
		g.deploy(g.deploySvc)
	}
	if i == g.rolloutAt {
		g.rolloutSvc.rolledOut = attrName(g.rng)
	}
	tenant := g.tenants[pick(g.rng, g.mix[b2i(i >= g.shiftAt)])]
	root := g.plan(g.services[0], 0, i, tenant)
	total := root.last()
	b := &build{g: g, i: i, tenant: tenant, start: end.Add(-total)}
	b.reqID = g.newReqID(b.start)
	b.r = &workload.Request{Truth: workload.Truth{ReqID: b.reqID, Scenario: workload.Healthy, Start: b.start, End: end,
		Host: g.services[0].instances[root.inst].Host}}
	b.emit(root, trace.SpanContext{}, nil)
	if g.traceOnly {
		b.r.Truth.ReqID = b.r.Truth.TraceIDs[0]
	}
	if b.failing {
		tr := &b.r.Truth
		tr.Scenario, tr.Failed, tr.Silent = g.incident, true, Silent(g.incident)
		faulty := g.faultySvc.instances[g.faulty]
		tr.RootCause = &workload.Cause{Kind: workload.CauseAttribute, Attribute: "service.instance.id", Value: faulty.Instance}
		tr.Host = faulty.Host
	}
	return b.r
}

// plan draws the visit of s starting at at, and of the services it calls.
func (g *Generator) plan(s *service, at time.Duration, i int, tenant string) *visit {
	v := &visit{s: s, inst: g.rng.IntN(len(s.instances)), start: at}
	v.faulty = i >= g.startAt && s == g.faultySvc && v.inst == g.faulty &&
		(g.incident != TwoTermStatus || tenant == g.faultyTenant)
	own := workload.Normal(g.rng, s.base, s.spread, s.base/4, s.base*4)
	if v.faulty && g.incident == SlowStage {
		own *= 10 + 20*g.rng.Float64()
	}
	t := at + ms(own/2)
	var detached []*call
	for _, c := range s.calls {
		if g.rng.Float64() >= c.p {
			continue
		}
		if c.async {
			detached = append(detached, c)
			continue
		}
		child := g.plan(c.to, t+hop, i, tenant)
		v.children = append(v.children, child)
		t = child.end + hop
	}
	v.end = t + ms(own/2)
	for _, c := range detached {
		v.children = append(v.children, g.plan(c.to, v.end+ms(1+50*g.rng.Float64()), i, tenant))
	}
	return v
}

// last is when the visit's last record is written.
func (v *visit) last() time.Duration {
	end := v.end
	for _, c := range v.children {
		end = max(end, c.last())
	}
	return end
}

// build writes one request's records.
type build struct {
	g       *Generator
	r       *workload.Request
	i       int
	tenant  string
	reqID   string
	start   time.Time
	failing bool
}

func (b *build) at(d time.Duration) time.Time { return b.start.Add(d) }

// emit writes v's span, its lines and its callees'. caller is the span that
// called it (invalid for the entry service and detached work).
func (b *build) emit(v *visit, caller trace.SpanContext, via *call) {
	g, s := b.g, v.s
	svc := s.instances[v.inst]
	parent := caller
	if via != nil && via.async {
		parent = trace.SpanContext{}
	}
	if via != nil && via.client && !via.async {
		parent = b.clientSpan(v, caller, via)
	}
	var ctx trace.SpanContext
	if parent.IsValid() {
		ctx = g.childOf(parent)
	} else {
		ctx = g.traceOf()
		b.r.Truth.TraceIDs = append(b.r.Truth.TraceIDs, ctx.TraceID().String())
	}
	fault := func(sc workload.Scenario) bool {
		return v.faulty && (g.incident == sc || sc == StatusError && g.incident == TwoTermStatus)
	}
	b.failing = b.failing || v.faulty

	span := workload.Span{Service: svc, Name: s.spanName, Kind: s.spanKind, Context: ctx, Parent: parent,
		Start: b.at(v.start), End: b.at(v.end)}
	if via != nil && via.async {
		span.Links = []trace.SpanContext{caller}
	}
	if s.reqIDKey != "" {
		span.Attrs = append(span.Attrs, attribute.String(s.reqIDKey, b.reqID))
	}
	span.Attrs = append(span.Attrs, attribute.String("stage", s.stage))
	if s == g.services[0] {
		span.Attrs = append(span.Attrs, attribute.String("tenant", b.tenant))
	}
	if s.spanKind == trace.SpanKindServer {
		status := int64(200)
		if fault(HTTPServer5xx) {
			status = 503
		}
		span.Attrs = append(span.Attrs, attribute.Int64("http.response.status_code", status))
	}
	switch {
	case fault(StatusError):
		span.Error = word(g.rng) + " failed"
	case fault(Exception):
		span.Events = append(span.Events, workload.Event{Name: "exception", Time: b.at(v.end),
			Attrs: []attribute.KeyValue{attribute.String("exception.type", strings.ToUpper(word(g.rng)[:1])+word(g.rng)+"Error"),
				attribute.String("exception.message", word(g.rng)+" "+word(g.rng))}})
	case fault(ErrorType):
		span.Attrs = append(span.Attrs, attribute.String("error.type", word(g.rng)))
	}
	var lineFields []attribute.KeyValue
	for _, o := range s.outcomes {
		kv, ok := b.outcomeValue(o, v.faulty)
		switch {
		case !ok:
		case o.onSpan, o.kind == listOutcome && s.format == logfmtBody: // logfmt has no lists
			span.Attrs = append(span.Attrs, kv)
		default:
			lineFields = append(lineFields, kv)
		}
	}
	if s.rolledOut != "" && g.rng.Float64() < float64(b.i-g.rolloutAt)/float64(max(1, g.cfg.Requests/10)) {
		lineFields = append(lineFields, attribute.String(s.rolledOut, g.tenantWord()))
	}
	b.r.Spans = append(b.r.Spans, span)
	b.r.Truth.Spans++

	if s.startLine {
		var fields []attribute.KeyValue
		if s == g.services[0] {
			fields = append(fields, attribute.String("tenant", b.tenant))
		}
		b.line(v, ctx, v.start, info.sev, info.text, s.startMsg, fields)
	}
	for _, c := range v.children {
		b.emit(c, ctx, c.s.calledBy)
	}
	switch {
	case fault(StatusError):
		b.line(v, ctx, v.end, errorLevel.sev, errorLevel.text, span.Error, lineFields)
	case fault(TextOnly):
		b.line(v, ctx, v.end, 0, "", "Traceback (most recent call last):\n  File \"/srv/"+word(g.rng)+".py\", line "+
			strconv.Itoa(10+g.rng.IntN(400))+", in handle\n"+strings.ToUpper(word(g.rng)[:1])+word(g.rng)+"Error: "+word(g.rng), nil)
		b.line(v, ctx, v.end, info.sev, info.text, s.endMsg, lineFields)
	default:
		b.line(v, ctx, v.end, info.sev, info.text, s.endMsg, lineFields)
	}
}

// tenantWord is a value of the rolled-out field: one of a few words.
func (g *Generator) tenantWord() string { return g.tenants[g.rng.IntN(len(g.tenants))] }

// clientSpan writes the caller's client span around a call to v and
// returns its context.
func (b *build) clientSpan(v *visit, caller trace.SpanContext, via *call) trace.SpanContext {
	g := b.g
	ctx := g.childOf(caller)
	callerSvc := via.from.instances[0]
	span := workload.Span{Service: callerSvc, Name: v.s.spanName, Kind: trace.SpanKindClient, Context: ctx, Parent: caller,
		Start: b.at(v.start - hop), End: b.at(v.end + hop)}
	if via.grpc {
		code := int64(0)
		if v.faulty && g.incident == GRPCClient {
			code = 14 // UNAVAILABLE
		}
		span.Attrs = append(span.Attrs, attribute.String("rpc.system", "grpc"), attribute.Int64("rpc.grpc.status_code", code))
	} else {
		span.Attrs = append(span.Attrs, attribute.String("http.request.method", "POST"), attribute.Int64("http.response.status_code", 200))
	}
	b.r.Spans = append(b.r.Spans, span)
	b.r.Truth.Spans++
	if v.faulty && g.incident == GRPCClient {
		b.r.Logs = append(b.r.Logs, workload.Log{Service: callerSvc, Time: b.at(v.end + hop), Severity: log.SeverityWarn,
			SeverityText: "WARN", Body: "upstream " + v.s.name + " unavailable, retrying", Context: ctx})
		b.count(b.r.Logs[len(b.r.Logs)-1])
	}
	return ctx
}

// outcomeValue is o's value on a line of a visit; ok is false when the line
// does not write it.
func (b *build) outcomeValue(o *outcome, faulty bool) (attribute.KeyValue, bool) {
	g := b.g
	target := faulty && g.target == o
	if target && g.incident == FieldMissing || g.rng.Float64() >= o.presence {
		return attribute.KeyValue{}, false
	}
	switch o.kind {
	case wordOutcome:
		if target && g.incident == NewValue {
			return attribute.String(o.name, incidentWord), true
		}
		return attribute.String(o.name, o.words[pick(g.rng, o.shares)]), true
	case flagOutcome:
		return attribute.Bool(o.name, target && g.incident == FlagTurns || g.rng.Float64() < o.shares[0]), true
	case countOutcome:
		if target && g.incident == CountZero {
			return attribute.Int64(o.name, 0), true
		}
		return attribute.Int64(o.name, int64(1+g.rng.IntN(30))), true
	case scoreOutcome:
		score := workload.Normal(g.rng, 0.8, 0.07, 0.5, 1)
		if target && g.incident == ScoreDrop {
			score = workload.Normal(g.rng, 0.3, 0.07, 0.05, 0.5)
		}
		return attribute.Float64(o.name, float64(int(score*1000))/1000), true
	}
	list := []string{o.words[pick(g.rng, o.shares)]}
	if g.rng.IntN(3) == 0 {
		list = append(list, o.words[pick(g.rng, o.shares)])
	}
	if target && g.incident == ListValue {
		list = append(list, incidentListWord)
	}
	return attribute.StringSlice(o.name, list), true
}

// line writes one log line of v in the service's format.
func (b *build) line(v *visit, ctx trace.SpanContext, at time.Duration, sev log.Severity, level, msg string, fields []attribute.KeyValue) {
	s := v.s
	l := workload.Log{Service: s.instances[v.inst], Time: b.at(at), Context: ctx}
	if s.reqIDKey != "" {
		fields = append([]attribute.KeyValue{attribute.String(s.reqIDKey, b.reqID)}, fields...)
	}
	bodyLevel := strings.ToLower(level)
	switch s.format {
	case jsonBody:
		l.Body = jsonLine(bodyLevel, msg, fields)
	case logfmtBody:
		l.Body = logfmtLine(bodyLevel, msg, fields)
	case plainBody:
		l.Body, l.Attrs = msg, fields
		if s.reqIDKey != "" {
			l.Body, l.Attrs = msg+" "+b.reqID, fields[1:]
		}
		l.Severity, l.SeverityText = sev, level
	default:
		l.Body, l.Attrs, l.Severity, l.SeverityText = msg, fields, sev, level
	}
	if level == "" { // an error only its text shows
		l.Severity, l.SeverityText, l.Body = 0, "", msg
		if s.reqIDKey != "" {
			l.Body += "\nrequest " + b.reqID
		}
		l.Attrs = nil
	}
	b.r.Logs = append(b.r.Logs, l)
	b.count(l)
}

// count adds a line to the truth: one that names the request, or one that
// carries only its trace context.
func (b *build) count(l workload.Log) {
	if workload.Mentions(b.reqID, l.Body, l.Attrs) {
		b.r.Truth.Logs++
	} else {
		b.r.Truth.TracedLogs++
	}
}

func jsonLine(level, msg string, fields []attribute.KeyValue) string {
	var sb strings.Builder
	sb.WriteString(`{"level":"` + level + `","msg":` + strconv.Quote(msg))
	for _, kv := range fields {
		sb.WriteString(`,` + strconv.Quote(string(kv.Key)) + `:`)
		switch kv.Value.Type() {
		case attribute.STRING:
			sb.WriteString(strconv.Quote(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			sb.WriteByte('[')
			for i, w := range kv.Value.AsStringSlice() {
				if i > 0 {
					sb.WriteByte(',')
				}
				sb.WriteString(strconv.Quote(w))
			}
			sb.WriteByte(']')
		default:
			sb.WriteString(kv.Value.String())
		}
	}
	sb.WriteByte('}')
	return sb.String()
}

func logfmtLine(level, msg string, fields []attribute.KeyValue) string {
	var sb strings.Builder
	sb.WriteString("level=" + level + " msg=" + strconv.Quote(msg))
	for _, kv := range fields {
		v := kv.Value.String()
		if kv.Value.Type() == attribute.STRINGSLICE {
			v = strings.Join(kv.Value.AsStringSlice(), ",")
		}
		sb.WriteString(" " + string(kv.Key) + "=" + v)
	}
	return sb.String()
}
