// Package fuzz draws random inference-service workloads from a seed: a
// topology of 3 to 15 services with random names, stages and attributes,
// record shapes of every kind (start and end lines, optional fields, JSON,
// logfmt and plain text, spans of each kind), request-id alias spellings,
// benign change (a field rolled out mid-run, a version deployed to every
// instance, a shift in the traffic's mix) and one incident drawn from the
// classes of evidence a failure verdict must read, with its ground truth.
//
// It exists to judge the failure model on traffic nobody tuned it for: no
// detector may know its vocabulary (Vocabulary lists its fixed words).
package fuzz // import "github.com/loom-otel/loom/internal/workload/fuzz"

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
)

// Incident classes. The first ones are loud (a record says it failed), the
// rest silent (only values, fields and timings show it).
const (
	StatusError   workload.Scenario = "status_error"   // a span with status error and an ERROR line
	HTTPServer5xx workload.Scenario = "http_5xx"       // a server span with a 5xx, status unset
	GRPCClient    workload.Scenario = "grpc_client"    // the caller's client span with UNAVAILABLE, status unset
	Exception     workload.Scenario = "exception"      // an exception event on the span
	ErrorType     workload.Scenario = "error_type"     // error.type on the span
	TextOnly      workload.Scenario = "text_only"      // a stack trace in a log body, no severity
	SlowStage     workload.Scenario = "slow_stage"     // the stage takes ten to thirty times longer
	NewValue      workload.Scenario = "new_value"      // an outcome word takes a value it never had
	CountZero     workload.Scenario = "count_zero"     // a count drops to zero
	FieldMissing  workload.Scenario = "field_missing"  // a line stops writing a field
	FlagTurns     workload.Scenario = "flag_turns"     // a flag that was false turns true
	ScoreDrop     workload.Scenario = "score_drop"     // a score in [0,1] drops from about 0.8 to about 0.3
	ListValue     workload.Scenario = "list_value"     // a list-valued outcome takes a rare element
	TwoTermStatus workload.Scenario = "two_term_error" // a status error only where an instance meets a tenant
)

// Incidents lists every incident class.
func Incidents() []workload.Scenario {
	return []workload.Scenario{StatusError, HTTPServer5xx, GRPCClient, Exception, ErrorType, TextOnly, SlowStage,
		NewValue, CountZero, FieldMissing, FlagTurns, ScoreDrop, ListValue, TwoTermStatus}
}

// Silent says whether an incident class leaves no explicit error signal.
func Silent(sc workload.Scenario) bool {
	switch sc {
	case SlowStage, NewValue, CountZero, FieldMissing, FlagTurns, ScoreDrop, ListValue:
		return true
	}
	return false
}

// Vocabulary is every fixed word the generator writes: the failure model's
// source must name none of them.
func Vocabulary() []string { return []string{incidentWord, incidentListWord} }

const (
	incidentWord     = "wrongful"
	incidentListWord = "truncated_by_upstream"
)

// Config selects a workload.
type Config struct {
	Seed uint64
	// Requests is the run's length; benign changes and the incident are
	// placed within it.
	Requests int
	// Incident is the class drawn; empty draws one from the seed.
	Incident workload.Scenario
}

// ParseIncident reads an incident class by name; "" and "random" draw one
// from the seed.
func ParseIncident(name string) (workload.Scenario, error) {
	sc := workload.Scenario(name)
	switch {
	case name == "" || name == "random":
		return "", nil
	case slices.Contains(Incidents(), sc):
		return sc, nil
	}
	names := make([]string, 0, len(Incidents()))
	for _, i := range Incidents() {
		names = append(names, string(i))
	}
	return "", fmt.Errorf("unknown fuzz incident %q (want random or one of %s)", name, strings.Join(names, ", "))
}

// Run draws cfg's workload and sends it at pace (workload.Send).
func Run(ctx context.Context, cfg Config, pace workload.Pace, target workload.Target, truth io.Writer) (workload.Summary, error) {
	gen, err := New(cfg)
	if err != nil {
		return workload.Summary{}, err
	}
	return workload.Send(ctx, gen, pace, target, truth)
}

// Generator models the workload's requests, one per Next.
type Generator struct {
	cfg      Config
	rng      *rand.Rand
	services []*service
	tenants  []string
	mix      [2][]float64 // the tenants' shares before and after the shift
	incident workload.Scenario
	// faulty is the instance the incident lives in, on service faultySvc;
	// faultyTenant narrows a two-term incident.
	faultySvc    *service
	faulty       int
	faultyTenant string
	// target is the outcome a silent incident changes.
	target     *outcome
	startAt    int // the incident's first request
	rolloutAt  int // a field rolled out on rolloutSvc from here on
	rolloutSvc *service
	deployAt   int // deploySvc's instances are replaced by a new version here
	deploySvc  *service
	shiftAt    int
	// traceOnly: no service writes a request id, as most OpenTelemetry-
	// instrumented systems; a request is its entry trace, detached work
	// joins it by a span link.
	traceOnly bool
	n         int
	all       int // service instances handed out, deploys included
}

// New returns the generator of cfg's workload.
func New(cfg Config) (*Generator, error) {
	if cfg.Requests <= 0 {
		return nil, fmt.Errorf("fuzz: Requests must be positive; got %d", cfg.Requests)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6675_7a7a))
	g := &Generator{cfg: cfg, rng: rng, incident: cfg.Incident}
	if g.incident == "" {
		all := Incidents()
		g.incident = all[rng.IntN(len(all))]
	}
	g.topology()
	// Drawn apart, so that a seed's other draws are the same either way.
	if rand.New(rand.NewPCG(cfg.Seed, 0x7472_6163)).IntN(3) == 0 {
		g.traceOnly = true
		for _, s := range g.services {
			s.reqIDKey = ""
		}
	}
	for range 2 + rng.IntN(4) {
		g.tenants = append(g.tenants, word(rng))
	}
	g.mix[0], g.mix[1] = shares(rng, len(g.tenants)), shares(rng, len(g.tenants))
	n := cfg.Requests
	g.startAt = n/3 + rng.IntN(n/4+1)
	g.rolloutAt, g.rolloutSvc = n/8+rng.IntN(n/2+1), g.services[rng.IntN(len(g.services))]
	g.deployAt, g.deploySvc = n/8+rng.IntN(n/2+1), g.services[rng.IntN(len(g.services))]
	g.shiftAt = n/8 + rng.IntN(n/2+1)
	g.placeIncident()
	return g, nil
}

// Services is how many service instances the requests come from.
func (g *Generator) Services() int { return g.all }

// Incident is the class of the workload's incident.
func (g *Generator) Incident() workload.Scenario { return g.incident }

// TraceOnly reports whether no service of the workload writes a request id:
// each request's truth names it by the key of its entry trace
// (golden.TraceKey).
func (g *Generator) TraceOnly() bool { return g.traceOnly }

func shares(rng *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	total := 0.0
	for i := range out {
		out[i] = 0.1 + rng.Float64()
		total += out[i]
	}
	for i := range out {
		out[i] /= total
	}
	return out
}

func pick(rng *rand.Rand, shares []float64) int {
	u := rng.Float64()
	for i, s := range shares {
		if u < s {
			return i
		}
		u -= s
	}
	return len(shares) - 1
}

// word is a random pronounceable word of 3 to 9 letters.
func word(rng *rand.Rand) string {
	const consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
	b := make([]byte, 3+rng.IntN(7))
	for i := range b {
		if i%2 == 0 {
			b[i] = consonants[rng.IntN(len(consonants))]
		} else {
			b[i] = vowels[rng.IntN(len(vowels))]
		}
	}
	return string(b)
}

// attrName is a random attribute name, dotted or snake_case.
func attrName(rng *rand.Rand) string {
	switch rng.IntN(3) {
	case 0:
		return word(rng) + "." + word(rng)
	case 1:
		return word(rng) + "_" + word(rng)
	}
	return word(rng)
}

// ms is f milliseconds.
func ms(f float64) time.Duration { return workload.Millis(f) }

// The levels of the lines the services write.
var (
	info       = level{log.SeverityInfo, "INFO"}
	errorLevel = level{log.SeverityError, "ERROR"}
)

type level struct {
	sev  log.Severity
	text string
}

// newReqID is a request id in the contract's default format.
func (g *Generator) newReqID(start time.Time) string { return golden.NewReqID(start, g.rng) }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// traceOf starts a trace.
func (g *Generator) traceOf() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: workload.NewTraceID(g.rng), SpanID: workload.NewSpanID(g.rng),
		TraceFlags: trace.FlagsSampled})
}

// childOf is a new span of parent's trace.
func (g *Generator) childOf(parent trace.SpanContext) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: workload.NewSpanID(g.rng),
		TraceFlags: trace.FlagsSampled})
}

func itoa(n int) string { return strconv.Itoa(n) }
