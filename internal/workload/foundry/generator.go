package foundry

import (
	"math/rand/v2"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
)

// imageShare of the requests ask for an image; the rest are chat completions.
const imageShare = 0.12

// hop is the network time between two services.
const hop = 400 * time.Microsecond

// Generator is the family's deterministic request model, a workload.Source:
// the same Config (Seed included) yields the same requests, ids and record
// contents, given the same end times.
type Generator struct {
	cfg       Config
	selected  []workload.Scenario
	onset     int
	rng       *rand.Rand
	topo      *topology
	incidents map[workload.Scenario]incident
	chats     []prompt
	images    []prompt
	n         int // requests generated so far
	text      text
}

// NewGenerator returns a generator for cfg.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The fixed parts (topology, prompt pools) come from a stream of their own.
	setup := rand.New(rand.NewPCG(cfg.Seed, 11))
	topo := newTopology(setup)
	return &Generator{
		cfg:       cfg,
		selected:  cfg.selected(),
		onset:     cfg.onset(),
		rng:       rand.New(rand.NewPCG(cfg.Seed, 12)),
		topo:      topo,
		incidents: topo.incidents(),
		chats:     chatPrompts(setup, 600),
		images:    imagePrompts(setup, 120),
	}, nil
}

// Services is how many service instances the family emits from.
func (g *Generator) Services() int { return len(g.topo.all) }

// Onset is the index of the first request an incident may hit.
func (g *Generator) Onset() int { return g.onset }

// Next models the next request, placed so that its main flow ends at end; a
// LateWrite failure's line comes seconds later, in Request.Late.
func (g *Generator) Next(end time.Time) *workload.Request {
	sc := g.pick()
	var r *workload.Request
	if sc == BlackImages || sc == workload.Healthy && g.rng.Float64() < imageShare {
		r = g.imageRequest(end, sc)
	} else {
		r = g.chatRequest(end, sc)
	}
	g.n++
	return r
}

// pick draws the scenario of the next request: after the warm-up, Affected
// is the share hit by an incident, split evenly between the selected ones.
func (g *Generator) pick() workload.Scenario {
	if len(g.selected) == 0 || g.n < g.onset || g.rng.Float64() >= g.cfg.Affected {
		return workload.Healthy
	}
	return g.selected[g.rng.IntN(len(g.selected))]
}

// active reports whether incident sc has started: from then on, healthy
// requests stay away from what it breaks.
func (g *Generator) active(sc workload.Scenario) bool {
	return g.n >= g.onset && slices.Contains(g.selected, sc)
}

// option is one value of a categorical attribute and its share of healthy traffic.
type option struct {
	value  string
	weight float64
}

// choose draws one of opts by weight, never except (unless it is all there is).
func (g *Generator) choose(opts []option, except string) string {
	total := 0.0
	for _, o := range opts {
		if o.value != except {
			total += o.weight
		}
	}
	u := g.rng.Float64() * total
	for _, o := range opts {
		if o.value == except {
			continue
		}
		if u -= o.weight; u < 0 {
			return o.value
		}
	}
	return opts[len(opts)-1].value
}

func (g *Generator) uniform(lo, hi float64) float64 { return workload.Uniform(g.rng, lo, hi) }

func (g *Generator) normal(mean, sd, lo, hi float64) float64 {
	return workload.Normal(g.rng, mean, sd, lo, hi)
}

func (g *Generator) chance(p float64) bool { return g.rng.Float64() < p }

func ms(f float64) time.Duration { return workload.Millis(f) }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// level is a severity as set on the OTLP record; the zero level leaves it
// unset, as for lines collected from stdout, whose level is in the body only.
type level struct {
	sev  log.Severity
	text string
}

var (
	unset   = level{}
	goInfo  = level{log.SeverityInfo, "INFO"}
	goWarn  = level{log.SeverityWarn, "WARN"}
	goDebug = level{log.SeverityDebug, "DEBUG"}
	pyInfo  = level{log.SeverityInfo, "INFO"}
	pyWarn  = level{log.SeverityWarn, "WARNING"}
)

// build accumulates the records of one request.
type build struct {
	g     *Generator
	r     *workload.Request
	start time.Time
	id    string
}

func (g *Generator) newBuild(start, end time.Time, sc workload.Scenario) *build {
	id := golden.NewReqID(start, g.rng)
	return &build{g: g, start: start, id: id, r: &workload.Request{
		Truth: workload.Truth{ReqID: id, Scenario: sc, Start: start, End: end, TraceIDs: make([]string, 0, 3)},
		Spans: make([]workload.Span, 0, 14),
		Logs:  make([]workload.Log, 0, 10),
	}}
}

// span adds a span from..to after the request start with stage first, then
// attrs; an invalid parent starts a new trace. It returns the span's context.
func (b *build) span(svc *workload.Service, name, stage string, kind trace.SpanKind, parent trace.SpanContext, from, to time.Duration, attrs ...attribute.KeyValue) trace.SpanContext {
	traceID := parent.TraceID()
	if !parent.IsValid() {
		traceID = workload.NewTraceID(b.g.rng)
		b.r.Truth.TraceIDs = append(b.r.Truth.TraceIDs, traceID.String())
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: workload.NewSpanID(b.g.rng), TraceFlags: trace.FlagsSampled})
	all := make([]attribute.KeyValue, 0, 1+len(attrs))
	all = append(all, attribute.String(golden.Stage, stage))
	b.r.Spans = append(b.r.Spans, workload.Span{Service: svc, Name: name, Kind: kind, Context: sc, Parent: parent,
		Start: b.start.Add(from), End: b.start.Add(to), Attrs: append(all, attrs...)})
	b.r.Truth.Spans++
	return sc
}

// lastSpan is the span added last, for an incident to change.
func (b *build) lastSpan() *workload.Span { return &b.r.Spans[len(b.r.Spans)-1] }

// log adds a log record at `at` after the request start, written in span sc
// (invalid: outside any span, as stdout lines and engine internals are).
func (b *build) log(svc *workload.Service, at time.Duration, lv level, sc trace.SpanContext, body string, attrs ...attribute.KeyValue) {
	b.r.Logs = append(b.r.Logs, b.record(svc, at, lv, sc, body, attrs))
}

// late adds a record that is written, and arrives, after the main flow.
func (b *build) late(svc *workload.Service, at time.Duration, lv level, sc trace.SpanContext, body string) {
	b.r.Late = append(b.r.Late, b.record(svc, at, lv, sc, body, nil))
	b.r.Truth.End = b.start.Add(at)
}

func (b *build) record(svc *workload.Service, at time.Duration, lv level, sc trace.SpanContext, body string, attrs []attribute.KeyValue) workload.Log {
	switch {
	case workload.Mentions(b.id, body, attrs):
		b.r.Truth.Logs++
	case sc.IsValid():
		b.r.Truth.TracedLogs++
	default:
		b.r.Truth.NoiseLogs++
	}
	return workload.Log{Service: svc, Time: b.start.Add(at), Severity: lv.sev, SeverityText: lv.text, Body: body, Attrs: attrs, Context: sc}
}
