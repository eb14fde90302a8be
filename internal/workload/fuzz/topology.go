package fuzz

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/workload"
)

// service is one service of the topology: its instances, the calls it
// makes, and how it writes its records.
type service struct {
	name, stage, spanName string
	spanKind              trace.SpanKind
	instances             []*workload.Service
	version               int
	calls                 []*call
	// reqIDKey is the spelling the service writes the request id under;
	// empty: it writes none, and its records carry only trace context.
	reqIDKey string
	format   bodyFormat
	// startLine: the service also writes a line when it starts its work.
	startLine bool
	startMsg  string
	endMsg    string
	outcomes  []*outcome
	// base and spread draw its own work's duration, in milliseconds.
	base, spread float64
	// reach is the share of requests that visit it.
	reach float64
	// calledBy is the call that reaches it (nil for the entry service).
	calledBy *call
	// rolledOut is the field the rollout adds to its end lines.
	rolledOut string
}

// call is one service calling another.
type call struct {
	from, to *service
	p        float64 // the share of the caller's visits that make the call
	async    bool    // the callee works in a trace of its own, after the caller
	client   bool    // the caller records a client span around the call
	grpc     bool    // the call is gRPC (else HTTP)
}

type bodyFormat int

const (
	jsonBody bodyFormat = iota
	logfmtBody
	plainBody      // free text, the fields as attributes
	attributesOnly // a short message, every field an attribute
)

type outcomeKind int

const (
	wordOutcome outcomeKind = iota
	flagOutcome
	countOutcome
	scoreOutcome
	listOutcome
)

// outcome is a field a service writes about the work it did.
type outcome struct {
	name     string
	kind     outcomeKind
	words    []string
	shares   []float64
	presence float64 // the share of lines that write it
	onSpan   bool    // written on the span, else on the end line
}

// reqIDSpellings are the request-id spellings services write, as the
// golden-field contract's aliases know them.
var reqIDSpellings = []string{"req_id", "request_id", "requestId", "x_request_id", "x-request-id", "llm.request_id", "inference_id"}

func (g *Generator) topology() {
	rng := g.rng
	n := 3 + rng.IntN(13)
	for i := range n {
		s := &service{name: word(rng) + "-" + word(rng), stage: word(rng) + "/" + word(rng), spanKind: trace.SpanKindServer,
			format: bodyFormat(rng.IntN(4)), startLine: rng.Float64() < 0.6, startMsg: word(rng) + " " + word(rng),
			endMsg: word(rng) + " " + word(rng), base: 2 + 150*rng.Float64()*rng.Float64(), reach: 1}
		s.spread = s.base * (0.05 + 0.3*rng.Float64())
		s.spanName = s.stage
		if rng.IntN(3) == 0 {
			s.spanName = word(rng) + "." + word(rng)
		}
		if i == 0 || rng.Float64() < 0.6 {
			s.reqIDKey = reqIDSpellings[rng.IntN(len(reqIDSpellings))]
		}
		for range 1 + rng.IntN(3) {
			s.instances = append(s.instances, g.instance(s))
		}
		for range rng.IntN(4) {
			s.outcomes = append(s.outcomes, g.newOutcome(outcomeKind(rng.IntN(5))))
		}
		if i > 0 {
			from := g.services[rng.IntN(i)]
			c := &call{from: from, to: s, p: 0.5 + 0.5*rng.Float64(), async: i > 1 && rng.Float64() < 0.15,
				client: rng.Float64() < 0.5, grpc: rng.IntN(2) == 0}
			if c.async {
				s.spanKind = trace.SpanKindConsumer
				if s.reqIDKey == "" { // detached work joins its request by the id it carries
					s.reqIDKey = reqIDSpellings[rng.IntN(len(reqIDSpellings))]
				}
			} else if rng.IntN(4) == 0 {
				s.spanKind = trace.SpanKindInternal
			}
			from.calls = append(from.calls, c)
			s.calledBy = c
			s.reach = from.reach * c.p
		}
		g.services = append(g.services, s)
	}
}

// instance adds an instance of s: a pod of its current version.
func (g *Generator) instance(s *service) *workload.Service {
	g.all++
	return &workload.Service{Name: s.name, Instance: s.name + "-" + word(g.rng) + "-" + itoa(g.all),
		Host: "node-" + word(g.rng), Version: "1." + itoa(s.version) + "." + itoa(g.rng.IntN(9)),
		Language: []string{"go", "python", "java", "nodejs"}[g.rng.IntN(4)], PID: 100 + g.rng.IntN(30000)}
}

// deploy replaces every instance of s by one of a new version.
func (g *Generator) deploy(s *service) {
	s.version++
	for i := range s.instances {
		s.instances[i] = g.instance(s)
	}
}

func (g *Generator) newOutcome(kind outcomeKind) *outcome {
	rng := g.rng
	o := &outcome{name: attrName(rng), kind: kind, presence: 1, onSpan: rng.IntN(2) == 0}
	if rng.Float64() < 0.25 {
		o.presence = 0.5 + 0.45*rng.Float64()
	}
	switch kind {
	case wordOutcome, listOutcome:
		for range 2 + rng.IntN(3) {
			o.words = append(o.words, word(rng))
		}
		o.shares = shares(rng, len(o.words))
	case flagOutcome:
		o.shares = []float64{0.002 + 0.01*rng.Float64()} // the share that is true
	}
	return o
}

// outcomeOf returns an outcome of s of the kind, adding one when s has none:
// the incident needs it.
func (g *Generator) outcomeOf(s *service, kind outcomeKind) *outcome {
	for _, o := range s.outcomes {
		if o.kind == kind && o.presence == 1 {
			return o
		}
	}
	o := g.newOutcome(kind)
	o.presence = 1
	s.outcomes = append(s.outcomes, o)
	return o
}

// placeIncident picks the faulty instance: of a service that most requests
// visit, of a kind the incident can show in.
func (g *Generator) placeIncident() {
	var candidates []*service
	for _, s := range g.services {
		if s.reach < 0.3 {
			continue
		}
		switch g.incident {
		case GRPCClient:
			if s.calledBy == nil || s.calledBy.async {
				continue
			}
			s.calledBy.client, s.calledBy.grpc = true, true
		case HTTPServer5xx:
			if s.spanKind != trace.SpanKindServer {
				continue
			}
		}
		candidates = append(candidates, s)
	}
	if len(candidates) == 0 { // the entry service is always there
		candidates = []*service{g.services[0]}
		if g.incident == GRPCClient {
			g.incident = HTTPServer5xx
		}
	}
	s := candidates[g.rng.IntN(len(candidates))]
	g.faultySvc, g.faulty = s, g.rng.IntN(len(s.instances))
	g.faultyTenant = g.tenants[g.rng.IntN(len(g.tenants))]
	switch g.incident {
	case NewValue:
		g.target = g.outcomeOf(s, wordOutcome)
	case CountZero:
		g.target = g.outcomeOf(s, countOutcome)
	case FieldMissing:
		g.target = g.outcomeOf(s, outcomeKind(g.rng.IntN(5)))
	case FlagTurns:
		g.target = g.outcomeOf(s, flagOutcome)
	case ScoreDrop:
		g.target = g.outcomeOf(s, scoreOutcome)
	case ListValue:
		g.target = g.outcomeOf(s, listOutcome)
	}
}
