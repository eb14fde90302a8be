package workload

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/log"
)

// TestHotInputsShape: about 90% of the failures fall in one family of inputs
// (a tenth of the distinct prompts, input_hash 00–09), a quarter of all
// failures show no sign in any record, and the rest of the family's requests
// are healthy requests that share a failing input.
func TestHotInputsShape(t *testing.T) {
	reqs, g := generate(t, Config{Scenarios: []Scenario{HotInputs}, Affected: 0.1, Seed: 3}, 20000)
	var failed, inFamily, silent, familyRequests, familyHealthy int
	distinct, markup := map[string]bool{}, map[string]bool{}
	for _, p := range g.markup {
		if !inMarkupRange(p.hash) {
			t.Fatalf("family input_hash %s outside %s", p.hash, markupRange)
		}
		markup[p.hash] = true
	}
	for _, r := range reqs {
		tr := r.Truth
		distinct[tr.InputHash] = true
		family := markup[tr.InputHash]
		if family {
			familyRequests++
			if !tr.Failed {
				familyHealthy++
			}
		}
		for _, s := range r.Spans {
			checkGolden(t, r, "span "+s.Name, attrFields(s.Attrs))
		}
		for _, l := range r.Logs {
			if f := logFields(t, l); f.values["stage"] != nil {
				checkGolden(t, r, "log "+l.Body, f)
			}
		}
		if !tr.Failed {
			continue
		}
		failed++
		if family {
			inFamily++
		}
		switch fate := fateOf(r); {
		case fate == fateSilent:
			silent++
			if tr.RootCause == nil || tr.RootCause.Value != markupRange {
				t.Fatalf("%s: silent failure without the family as its cause: %+v", tr.ReqID, tr.RootCause)
			}
		case fate == fateRandomError && family:
			t.Fatalf("%s: an ordinary engine error on a family input", tr.ReqID)
		}
	}
	within := func(name string, got, lo, hi float64) {
		t.Helper()
		if got < lo || got > hi {
			t.Errorf("%s = %.3f, want %.3f–%.3f", name, got, lo, hi)
		}
	}
	within("failing share", float64(failed)/float64(len(reqs)), 0.08, 0.10)
	within("failures in the family", float64(inFamily)/float64(failed), 0.86, 0.92)
	within("silent share of failures", float64(silent)/float64(failed), 0.22, 0.32)
	within("healthy share of family requests", float64(familyHealthy)/float64(familyRequests), 0.07, 0.13)
	within("family share of distinct inputs", float64(len(g.markup))/float64(len(g.markup)+len(g.prompts)), 0.09, 0.11)
	if len(distinct) < len(g.prompts) {
		t.Errorf("only %d distinct inputs in %d requests", len(distinct), len(reqs))
	}
}

// fateOf reads a HotInputs request's fate back from its records.
func fateOf(r *Request) hotFate {
	for _, s := range r.Spans {
		if s.Name == "model/forward" && s.Error != "" {
			if strings.HasPrefix(s.Error, "RuntimeError") {
				return fateRandomError
			}
			return fateError
		}
	}
	for _, l := range r.Logs {
		if strings.Contains(l.Body, "filter_reason="+markupFilterReason) {
			if !strings.Contains(l.Body, "output_length=0 ") {
				panic("an empty answer with a length: " + l.Body)
			}
			return fateEmpty
		}
		if l.Severity >= log.SeverityError {
			panic("an ERROR line without an error span: " + l.Body)
		}
	}
	if r.Truth.Failed {
		return fateSilent
	}
	return fateHealthy
}

func TestHotInputsDeterministic(t *testing.T) {
	cfg := Config{Scenarios: []Scenario{HotInputs, S1}, Affected: 0.2, Seed: 9}
	a, _ := generate(t, cfg, 500)
	b, _ := generate(t, cfg, 500)
	for i := range a {
		if a[i].Truth.ReqID != b[i].Truth.ReqID || a[i].Truth.Failed != b[i].Truth.Failed || len(a[i].Logs) != len(b[i].Logs) {
			t.Fatalf("request %d differs between two runs of one seed", i)
		}
	}
	if got, err := ParseScenarios("s1, hotinputs"); err != nil || got[1] != HotInputs {
		t.Fatalf("ParseScenarios = %v, %v", got, err)
	}
}
