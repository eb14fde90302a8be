package rcaextension

import (
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/golden"
)

// maxCandidates bounds the healthy requests read to find the nearest one.
const maxCandidates = 40

// comparisonView is a request beside the nearest healthy one and what
// differs between them, place by place.
type comparisonView struct {
	Bad  string `json:"bad"`
	Good string `json:"good"` // empty when the graph holds no healthy request near it
	// Match says why Good was picked: what the two share, and how far apart they are.
	Match       []string     `json:"match"`
	Differences []difference `json:"differences"`
	bad, good   *requestView
}

// difference is one field of one place (service, stage and kind of event):
// missing (the healthy request's events there carry it, the failing one's
// do not: a field a failure stopped writing), differs (both carry it, with
// values of another kind or magnitude), extra (only the failing one's carry
// it), or a whole place only one of them has (place_missing, place_extra).
type difference struct {
	Kind    string `json:"kind"`
	Service string `json:"service.name"`
	Stage   string `json:"stage"`
	Event   string `json:"event"` // the kind of event at the place: log or span
	Field   string `json:"field,omitempty"`
	Bad     any    `json:"bad,omitempty"`
	Good    any    `json:"good,omitempty"`
}

// differenceOrder puts what a failure most often shows first.
var differenceOrder = []string{"missing", "differs", "place_missing", "extra", "place_extra"}

// identityFields differ between any two requests: never a difference.
var identityFields = map[string]bool{golden.ReqID: true, golden.TraceID: true, golden.SpanID: true, golden.InputHash: true,
	golden.EventID: true}

// ignoredField: identities, and the bookkeeping of Loom's own components
// (validation, derived fields), which say how a record was read, not what
// the request did.
func ignoredField(name string) bool {
	return identityFields[name] || strings.HasPrefix(name, "golden.")
}

func (h *handler) loadComparison(r *http.Request) (*comparisonView, error) {
	bad, err := h.loadRequest(r)
	if err != nil {
		return nil, err
	}
	store, err := h.graph()
	if err != nil {
		return nil, err
	}
	v := &comparisonView{Bad: bad.ReqID, Match: []string{}, Differences: []difference{}, bad: bad}
	good, match, err := h.nearestHealthy(r.Context(), store, bad)
	if err != nil || good == nil {
		return v, err
	}
	v.Good, v.Match, v.good = good.ReqID, match, good
	v.Differences = diffRequests(bad.events, good.events)
	return v, nil
}

// nearestHealthy picks, among the healthy requests near bad (within 30
// seconds, else 2 minutes, else half a window), the one that went through the same places in the same order, then
// that shares its input and model, then the closest in time.
func (h *handler) nearestHealthy(ctx context.Context, store eventgraph.Store, bad *requestView) (*requestView, []string, error) {
	first, last := span(bad.events)
	// Look close first: at busy times the nearest candidates are seconds
	// away, and a narrow window lists fewer requests.
	var healthy []eventgraph.Request
	for _, reach := range []time.Duration{30 * time.Second, 2 * time.Minute, h.cfg.Window / 2} {
		var err error
		if healthy, err = store.Requests(ctx, first.Add(-reach), last.Add(reach), false); err != nil {
			return nil, nil, err
		}
		if len(healthy) >= maxCandidates || reach >= h.cfg.Window/2 {
			break
		}
	}
	distance := func(r eventgraph.Request) time.Duration { return absDuration(r.First.Sub(first)) }
	slices.SortFunc(healthy, func(a, b eventgraph.Request) int { return int(distance(a) - distance(b)) })
	healthy = healthy[:min(len(healthy), maxCandidates)]

	badPath, badInputs, badModels := traits(bad.events)
	var best []eventgraph.Event
	var bestReq eventgraph.Request
	bestScore := math.Inf(-1)
	var bestMatch []string
	for _, cand := range healthy {
		events, err := store.Timeline(ctx, cand.ReqID)
		if err != nil {
			return nil, nil, err
		}
		path, inputs, models := traits(events)
		score, match := 0.0, []string{}
		if slices.Equal(path, badPath) {
			score += 8
			match = append(match, "the same places in the same order")
		} else {
			score += 4 * overlap(path, badPath)
		}
		if shares(inputs, badInputs) {
			score += 2
			match = append(match, "the same input_hash")
		}
		if shares(models, badModels) {
			score++
			match = append(match, "the same model_ver")
		}
		if score > bestScore { // candidates come closest first: ties keep the closer
			best, bestReq, bestScore, bestMatch = events, cand, score, match
		}
	}
	if best == nil {
		return nil, nil, nil
	}
	bestMatch = append(bestMatch, formatOffset(distance(bestReq))+" apart")
	good := &requestView{ReqID: bestReq.ReqID, events: best}
	return good, bestMatch, nil
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// place is where an event happened, as the comparison matches events.
type place struct {
	service, stage string
	kind           eventgraph.Kind
}

func placeOf(e *eventgraph.Event) place { return place{e.Service, e.Stage, e.Kind} }

// traits are what nearestHealthy matches: the places in order of first
// visit, and the inputs and models the request names.
func traits(events []eventgraph.Event) (path []place, inputs, models []string) {
	for i := range events {
		e := &events[i]
		if p := placeOf(e); !slices.Contains(path, p) {
			path = append(path, p)
		}
		if e.InputHash != "" && !slices.Contains(inputs, e.InputHash) {
			inputs = append(inputs, e.InputHash)
		}
		if e.ModelVer != "" && !slices.Contains(models, e.ModelVer) {
			models = append(models, e.ModelVer)
		}
	}
	return path, inputs, models
}

// overlap is the share of places two paths have in common.
func overlap(a, b []place) float64 {
	common := 0
	for _, p := range a {
		if slices.Contains(b, p) {
			common++
		}
	}
	return float64(common) / float64(max(len(a)+len(b)-common, 1))
}

func shares(a, b []string) bool {
	for _, v := range a {
		if slices.Contains(b, v) {
			return true
		}
	}
	return false
}

// diffRequests compares two requests place by place.
func diffRequests(bad, good []eventgraph.Event) []difference {
	badFields, badOrder := fieldsByPlace(bad)
	goodFields, goodOrder := fieldsByPlace(good)
	var out []difference
	for _, p := range goodOrder {
		b, ok := badFields[p]
		if !ok {
			out = append(out, difference{Kind: "place_missing", Service: p.service, Stage: p.stage, Event: string(p.kind)})
			continue
		}
		if p.stage == "" {
			continue // the records without a stage are no one place: their fields are not compared
		}
		g := goodFields[p]
		for _, name := range slices.Sorted(maps.Keys(g)) {
			if ignoredField(name) {
				continue
			}
			bv, present := b[name]
			switch {
			case !present:
				out = append(out, difference{Kind: "missing", Service: p.service, Stage: p.stage, Event: string(p.kind), Field: name, Good: g[name]})
			case differs(bv, g[name]):
				out = append(out, difference{Kind: "differs", Service: p.service, Stage: p.stage, Event: string(p.kind), Field: name, Bad: bv, Good: g[name]})
			}
		}
		for _, name := range slices.Sorted(maps.Keys(b)) {
			if _, present := g[name]; !present && !ignoredField(name) {
				out = append(out, difference{Kind: "extra", Service: p.service, Stage: p.stage, Event: string(p.kind), Field: name, Bad: b[name]})
			}
		}
	}
	for _, p := range badOrder {
		if _, ok := goodFields[p]; !ok {
			out = append(out, difference{Kind: "place_extra", Service: p.service, Stage: p.stage, Event: string(p.kind)})
		}
	}
	slices.SortStableFunc(out, func(a, b difference) int {
		return slices.Index(differenceOrder, a.Kind) - slices.Index(differenceOrder, b.Kind)
	})
	return out
}

// present stands for the value of a field whose name alone the graph keeps.
const present = "(present)"

// fieldsByPlace gathers each place's fields: its events' attributes and the
// golden fields under their record names, the first value of each, and the
// names of the other fields its records carried. A field reqidstitch gave a
// record from its request's other records (golden.derived) is not the
// record's: whether it is there depends on the order records arrived in.
func fieldsByPlace(events []eventgraph.Event) (map[place]map[string]any, []place) {
	fields := map[place]map[string]any{}
	var order []place
	for i := range events {
		e := &events[i]
		p := placeOf(e)
		f, ok := fields[p]
		if !ok {
			f = map[string]any{}
			fields[p] = f
			order = append(order, p)
		}
		derived, _ := e.Attrs[golden.DerivedAttr].([]string)
		for k, v := range viewEvent(e).Attributes {
			if _, seen := f[k]; !seen && k != statusKey && k != severityNumberKey && k != severityTextKey &&
				k != eventgraph.FieldsAttr && !slices.Contains(derived, k) {
				f[k] = v
			}
		}
		names, _ := e.Attrs[eventgraph.FieldsAttr].([]string)
		for _, name := range names {
			if _, seen := f[name]; !seen {
				f[name] = present
			}
		}
	}
	return fields, order
}

// differs says whether two values of a field tell the requests apart: text
// and flags that are not equal, numbers when one is zero and the other not,
// or they are more than twice apart (a measurement's usual scatter is not).
func differs(a, b any) bool {
	x, xNum := a.(float64)
	y, yNum := b.(float64)
	if xNum && yNum {
		if x == 0 || y == 0 {
			return x != y
		}
		ratio := x / y
		return ratio > 2 || ratio < 0.5
	}
	if as, ok := a.([]string); ok {
		bs, ok := b.([]string)
		return !ok || strings.Join(as, "\x00") != strings.Join(bs, "\x00")
	}
	return a != b
}
