package workload

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/golden"
)

// Request is one modelled request: every span and log record it produces, in
// emission order, and its ground truth.
type Request struct {
	Truth Truth
	Spans []Span
	Logs  []Log
	// Late are log records written seconds after the request's main flow (an
	// async worker's failure, say), dated after the end given to Next. Send
	// holds each back until the wall clock reaches its Time, so that it also
	// arrives late; ToPdata puts them after Logs.
	Late []Log
}

// Records returns how many spans and log records the request produces.
func (r *Request) Records() int { return len(r.Spans) + len(r.Logs) + len(r.Late) }

// Span is one modelled span.
type Span struct {
	Service    *Service
	Name       string
	Kind       trace.SpanKind
	Context    trace.SpanContext // this span's trace and span id
	Parent     trace.SpanContext // invalid for the root of a trace
	Start, End time.Time
	Attrs      []attribute.KeyValue
	Error      string  // status description of a failed span; empty when it succeeded
	Events     []Event // span events, e.g. an exception
	// Links are the spans it links to: the work that started a detached
	// trace, as messaging instrumentations write it.
	Links []trace.SpanContext
}

// Event is one span event.
type Event struct {
	Name  string
	Time  time.Time
	Attrs []attribute.KeyValue
}

// Log is one modelled log record.
type Log struct {
	Service      *Service
	Time         time.Time
	Severity     log.Severity
	SeverityText string
	Body         string
	Attrs        []attribute.KeyValue
	Context      trace.SpanContext // the span it was logged in; invalid when logged outside any span
}

// level is a severity as a service's logging library prints it.
type level struct {
	sev  log.Severity
	text string
}

var (
	goDebug = level{log.SeverityDebug, "debug"}
	goInfo  = level{log.SeverityInfo, "info"}
	goWarn  = level{log.SeverityWarn, "warn"}
	pyInfo  = level{log.SeverityInfo, "INFO"}
	pyWarn  = level{log.SeverityWarn, "WARNING"}
	pyError = level{log.SeverityError, "ERROR"}
)

// hop is the network time between two services.
const hop = 300 * time.Microsecond

// Generator is the deterministic request model: the same Config (Seed
// included) yields the same sequence of requests, ids and record contents,
// given the same end times.
type Generator struct {
	cfg       Config
	incidents []Scenario
	rng       *rand.Rand
	topo      *topology
	prompts   []prompt
	slow      []prompt // the S2 input family; nil unless S2 is selected
	markup    []prompt // the HotInputs input family; nil unless HotInputs is selected
	upgradeAt int      // S1: index of the first request served after the model upgrade (never without S1)
	n         int      // requests generated so far
	line      line
}

// NewGenerator returns a generator for cfg.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// A separate stream for the fixed parts (topology, prompt pools) keeps
	// the request stream the same whichever scenarios need which pools.
	setup := rand.New(rand.NewPCG(cfg.Seed, 1))
	g := &Generator{
		cfg:       cfg,
		incidents: cfg.incidents(),
		rng:       rand.New(rand.NewPCG(cfg.Seed, 2)),
		topo:      newTopology(setup),
		prompts:   healthyPrompts(setup, 512),
		upgradeAt: math.MaxInt,
	}
	if contains(g.incidents, S2) {
		g.slow = emojiPrompts(setup, 16)
	}
	if contains(g.incidents, HotInputs) {
		g.markup = markupPrompts(setup, markupFamilySize)
	}
	if contains(g.incidents, S1) {
		g.upgradeAt = s1UpgradeAt(cfg)
	}
	return g, nil
}

// s1UpgradeAt is when S1's upgrade happens: after 5% of the requests, or after
// 50 when the run is bounded by time only, so that the schema drift has a
// "before" to compare with.
func s1UpgradeAt(cfg Config) int {
	if cfg.Requests > 0 {
		return cfg.Requests / 20
	}
	return 50
}

// Next models the next request, placed so that its last record ends at end.
// The request is the caller's to keep.
func (g *Generator) Next(end time.Time) *Request {
	var r *Request
	switch sc := g.pick(); {
	case sc == S3:
		r = g.celeryRequest(end, true)
	case sc == Healthy && contains(g.incidents, S3) && g.rng.Float64() < celeryShare:
		r = g.celeryRequest(end, false)
	default:
		r = g.gatewayRequest(end, sc)
	}
	g.n++
	return r
}

// upgraded reports whether S1's model upgrade has happened for the current request.
func (g *Generator) upgraded() bool { return g.n >= g.upgradeAt }

// pick draws the scenario of the next request: Affected is the share of all
// requests hit by an incident, split evenly between the selected incidents.
func (g *Generator) pick() Scenario {
	if len(g.incidents) == 0 || g.rng.Float64() >= g.cfg.Affected {
		return Healthy
	}
	sc := g.incidents[g.rng.IntN(len(g.incidents))]
	if sc == S1 && !g.upgraded() {
		return Healthy // nothing is upgraded yet
	}
	return sc
}

// engine routes a request to a model instance: S1 requests to the upgraded
// one, the others to the instances still on the old version.
func (g *Generator) engine(sc Scenario) *Service {
	if sc == S1 {
		return g.topo.upgraded
	}
	engines := g.topo.model
	if g.upgraded() {
		engines = engines[:len(engines)-1]
	}
	return engines[g.rng.IntN(len(engines))]
}

// build accumulates the records of one request.
type build struct {
	g     *Generator
	r     *Request
	start time.Time
	reqID string
}

func (g *Generator) newBuild(start time.Time, total time.Duration, reqID string, sc Scenario) *build {
	return &build{g: g, start: start, reqID: reqID, r: &Request{
		Truth: Truth{ReqID: reqID, Scenario: sc, Failed: sc != Healthy, RootCause: causeOf(sc),
			Start: start, End: start.Add(total), TraceIDs: make([]string, 0, 2)},
		Spans: make([]Span, 0, 10),
		Logs:  make([]Log, 0, 8),
	}}
}

// span adds a span from..to after the request start, with the golden fields
// first: req_id, stage, the request's input_hash and (unless attrs name the
// model, canonically or by an alias, or no model serves the request) its
// model_ver, all from the request's Truth. attrs must carry the span's
// resource_usage facts. An invalid parent starts a new trace. It returns the
// span's context.
func (b *build) span(svc *Service, name, stage string, kind trace.SpanKind, parent trace.SpanContext, from, to time.Duration, attrs ...attribute.KeyValue) trace.SpanContext {
	traceID := parent.TraceID()
	if !parent.IsValid() {
		traceID = b.g.traceID()
		b.r.Truth.TraceIDs = append(b.r.Truth.TraceIDs, traceID.String())
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: b.g.spanID(), TraceFlags: trace.FlagsSampled})
	all := make([]attribute.KeyValue, 0, 4+len(attrs))
	all = append(all, attribute.String(golden.ReqID, b.reqID), attribute.String(golden.Stage, stage))
	if h := b.r.Truth.InputHash; h != "" {
		all = append(all, attribute.String(golden.InputHash, h))
	}
	if v := b.r.Truth.ModelVer; v != "" && !namesModel(attrs) {
		all = append(all, attribute.String(golden.ModelVer, v))
	}
	b.r.Spans = append(b.r.Spans, Span{Service: svc, Name: name, Kind: kind, Context: sc, Parent: parent,
		Start: b.start.Add(from), End: b.start.Add(to), Attrs: append(all, attrs...)})
	b.r.Truth.Spans++
	return sc
}

// log adds a log record at `at` after the request start, logged in span sc
// (invalid: outside any span).
func (b *build) log(svc *Service, at time.Duration, lv level, sc trace.SpanContext, body string, attrs ...attribute.KeyValue) {
	b.r.Logs = append(b.r.Logs, Log{Service: svc, Time: b.start.Add(at), Severity: lv.sev, SeverityText: lv.text,
		Body: body, Attrs: attrs, Context: sc})
	if Mentions(b.reqID, body, attrs) {
		b.r.Truth.Logs++
	} else {
		b.r.Truth.NoiseLogs++
	}
}

// modelKeys are the attribute names that carry model_ver: the canonical one and its aliases.
var modelKeys = func() map[attribute.Key]bool {
	keys := map[attribute.Key]bool{golden.ModelVer: true}
	for alias, canonical := range golden.DefaultAliases() {
		if canonical == golden.ModelVer {
			keys[attribute.Key(alias)] = true
		}
	}
	return keys
}()

// namesModel reports whether attrs already carry the model, under any of its names.
func namesModel(attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if modelKeys[kv.Key] {
			return true
		}
	}
	return false
}

// noise adds one line of background chatter that belongs to no request.
func (b *build) noise(at time.Duration) {
	g, t, l := b.g, b.g.topo, &b.g.line
	switch g.rng.IntN(4) {
	case 0: // instances never upgraded, so noise says nothing about S1
		engine := t.model[g.rng.IntN(len(t.model)-1)]
		b.log(engine, at, pyInfo, trace.SpanContext{}, l.reset().text("{").jsonStr("level", "INFO").jsonStr("logger", "engine.scheduler").
			jsonStr("msg", "scheduler step").jsonInt("running", int64(1+g.rng.IntN(24))).jsonInt("waiting", int64(g.rng.IntN(4))).
			jsonFloat("kv_cache_usage", g.uniform(0.2, 0.8), 2).text("}").String())
	case 1:
		b.log(t.gateway[g.rng.IntN(len(t.gateway))], at, goInfo, trace.SpanContext{}, l.reset().text("{").jsonStr("level", "info").
			jsonStr("msg", "heartbeat ok").jsonStr("upstream", t.model[g.rng.IntN(len(t.model)-1)].Instance).text("}").String())
	case 2:
		b.log(t.preproc[g.rng.IntN(len(t.preproc))], at, pyInfo, trace.SpanContext{}, l.reset().text("gc: collected ").
			int(int64(100+g.rng.IntN(900))).text(" objects in ").float(g.uniform(0.5, 6), 1).text("ms").String())
	default:
		b.log(t.postproc, at, goDebug, trace.SpanContext{}, l.reset().kv("level", "debug").kv("msg", "heartbeat ok").
			kvInt("queue_depth", int64(g.rng.IntN(8))).String())
	}
}

func (g *Generator) traceID() trace.TraceID { return NewTraceID(g.rng) }

func (g *Generator) spanID() trace.SpanID { return NewSpanID(g.rng) }

// uuid returns a random (version 4) UUID drawn from the generator's stream.
func (g *Generator) uuid() string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], g.rng.Uint64())
	binary.BigEndian.PutUint64(u[8:], g.rng.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	hex.Encode(s[9:13], u[4:6])
	hex.Encode(s[14:18], u[6:8])
	hex.Encode(s[19:23], u[8:10])
	hex.Encode(s[24:], u[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}

func hex16(v uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return hex.EncodeToString(b[:])
}

func (g *Generator) uniform(lo, hi float64) float64 { return Uniform(g.rng, lo, hi) }

func (g *Generator) normal(mean, sd, lo, hi float64) float64 { return Normal(g.rng, mean, sd, lo, hi) }

func ms(f float64) time.Duration { return Millis(f) }

func round1(f float64) float64 { return math.Round(f*10) / 10 }

func latency(d time.Duration) attribute.KeyValue {
	return attribute.Float64(golden.LatencyMs, round1(float64(d)/float64(time.Millisecond)))
}
