package workload

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/golden"
)

// HotInputs is the traffic shape request-level sampling must cope with: AI
// failures are not uniform. One family of inputs (odd markup, very long
// URLs), about a tenth of the distinct prompts, fails nine times in ten:
// the model errors, the output filter empties the answer, or a garbled
// answer goes out with no sign of trouble in any record (only the ground
// truth knows). The family's input_hash values start with 00–09, like a
// range an operator would configure. A tenth of the requests the scenario
// affects fail in the ordinary way instead: an engine error on an ordinary
// input. So about 90% of the failures fall in the family, and a quarter of
// all failures are silent.
const HotInputs Scenario = "hotinputs"

const (
	// markupFamilySize makes the family about a tenth of the distinct prompts.
	markupFamilySize = 56
	// markupShare of the affected requests use a family input; the others
	// fail in the ordinary way.
	markupShare = 0.9
	// markupFailRate of the requests on a family input fail; the rest are
	// healthy requests that share a hot input.
	markupFailRate = 0.9
	// Shares of the family's failures that error and that come back empty;
	// the rest are silent.
	markupErrorShare = 0.4
	markupEmptyShare = 0.3

	markupFilterReason = "unsafe_markup"
)

// Ground truth of HotInputs failures.
const (
	// CauseInputHashRange is a range of input_hash prefixes, e.g. "00-09".
	CauseInputHashRange = "input_hash_range"
	// CauseRandom is a failure without a shared cause.
	CauseRandom = "random"

	markupRange = "00-09"
)

// hotFate is what happens to a HotInputs request.
type hotFate uint8

const (
	fateHealthy     hotFate = iota // a family input that worked this time
	fateError                      // the engine rejects the family input
	fateEmpty                      // the output filter empties the answer
	fateSilent                     // a garbled answer, no sign in any record
	fateRandomError                // an ordinary input, an ordinary engine error
)

// markupPrompts returns n markup-heavy prompts whose input_hash starts with
// 00–09, drawn from rng until the hash matches (10 in 256 tries).
func markupPrompts(rng *rand.Rand, n int) []prompt {
	const segment = "abcdefghijklmnopqrstuvwxyz0123456789-_"
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = segment[rng.IntN(len(segment))]
		}
		return string(b)
	}
	out := make([]prompt, 0, n)
	for len(out) < n {
		text := fmt.Sprintf(`Summarize <div class="%s"><table><tr><td>%s</td></tr></table></div> from https://%s.example.com/%s/%s?utm_source=%s&ref=%s`,
			word(6), word(12), word(8), word(40+rng.IntN(80)), word(30+rng.IntN(60)), word(10), word(24))
		hash := golden.HashInput(text)
		if !inMarkupRange(hash) {
			continue
		}
		// Markup and URLs tokenize into many short tokens.
		out = append(out, prompt{text: text, hash: hash, tokens: 900 + rng.IntN(1500)})
	}
	return out
}

// hotInput draws a HotInputs request's input and fate; p is the ordinary
// input already drawn.
func (g *Generator) hotInput(p prompt) (prompt, hotFate) {
	rng := g.rng
	if rng.Float64() >= markupShare {
		return p, fateRandomError
	}
	p = g.markup[rng.IntN(len(g.markup))]
	if rng.Float64() >= markupFailRate {
		return p, fateHealthy
	}
	switch u := rng.Float64(); {
	case u < markupErrorShare:
		return p, fateError
	case u < markupErrorShare+markupEmptyShare:
		return p, fateEmpty
	}
	return p, fateSilent
}

var outputLength = regexp.MustCompile(`\boutput_length=\d+`)

// meet applies a HotInputs request's fate to its records and ground truth.
func (b *build) meet(fate hotFate) {
	truth := &b.r.Truth
	truth.Failed = fate != fateHealthy
	truth.RootCause = &Cause{Kind: CauseInputHashRange, Value: markupRange}
	switch fate {
	case fateHealthy:
		truth.RootCause = nil
	case fateError:
		b.failForward("InvalidRequestError: markup expands past the context window", "context_window_exceeded")
	case fateRandomError:
		truth.RootCause = &Cause{Kind: CauseRandom}
		b.failForward("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_error")
	case fateEmpty:
		b.emptyOutput()
	}
}

// failForward marks the model/forward span failed and adds the engine's
// ERROR line, as an engine logs a rejected request.
func (b *build) failForward(message, errorType string) {
	span := b.findSpan("model/forward")
	span.Error = message
	l := &b.g.line
	l.reset().text("{").jsonStr("level", "ERROR").jsonStr("logger", "engine.forward").jsonStr("msg", "forward failed").
		jsonStr(golden.Stage, "model/forward").jsonStr(golden.ReqID, b.reqID).jsonStr("model_name", span.Service.Version).
		jsonStr(golden.InputHash, b.r.Truth.InputHash).jsonInt("duration_ms", span.End.Sub(span.Start).Milliseconds()).
		jsonStr("error_type", errorType).jsonStr("error", message).text("}")
	b.log(span.Service, span.End.Sub(b.start), pyError, trace.SpanContext{}, l.String())
}

// emptyOutput makes postproc/filter report an empty answer in its span and its log line.
func (b *build) emptyOutput() {
	span := b.findSpan("postproc/filter")
	for i, kv := range span.Attrs {
		switch kv.Key {
		case "output_length":
			span.Attrs[i] = attribute.Int64("output_length", 0)
		case "filter_reason":
			span.Attrs[i] = attribute.String("filter_reason", markupFilterReason)
		}
	}
	for i := range b.r.Logs {
		if l := &b.r.Logs[i]; strings.Contains(l.Body, "stage=postproc/filter") {
			l.Body = outputLength.ReplaceAllString(l.Body, "output_length=0")
			l.Body = strings.Replace(l.Body, "filter_reason=none", "filter_reason="+markupFilterReason, 1)
		}
	}
}

// findSpan returns the request's span of that name; every gateway request has
// one model/forward and one postproc/filter span.
func (b *build) findSpan(name string) *Span {
	for i := range b.r.Spans {
		if b.r.Spans[i].Name == name {
			return &b.r.Spans[i]
		}
	}
	panic("workload: no " + name + " span in a gateway request")
}

// inMarkupRange reports whether an input_hash is in the HotInputs family's range.
func inMarkupRange(hash string) bool { return len(hash) >= 2 && hash[0] == '0' && hash[1] <= '9' }
