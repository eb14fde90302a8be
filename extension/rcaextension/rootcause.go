package rcaextension

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/rootcause"
)

const (
	// maxDimensionValues: a dimension with more values in a window is an
	// id, not something failures share.
	maxDimensionValues = 256
	maxRootCauses      = 10
	maxExamples        = 5
	maxReasonEvidence  = 3
	// thinBaseline: with fewer healthy requests kept than this, a window's
	// ranking turns on which ones sampling happened to keep.
	thinBaseline = 30
	// InputHashPrefixDim names the input family dimension: the first digits
	// of input_hash.
	InputHashPrefixDim = "input_hash.prefix"
)

// rootCauseView is the ranking of a window: which dimension values, alone or
// together, explain the failing requests.
type rootCauseView struct {
	Window windowView `json:"window"`
	// Failing counts the failing requests; Total estimates all requests,
	// each kept request counted for the requests sampling let it stand for.
	Failing int `json:"failing"`
	Total   int `json:"total"`
	// Healthy counts the healthy requests kept: the baseline the failing
	// ones are compared with, whatever number of requests it stands for.
	Healthy    int             `json:"healthy"`
	Candidates []candidateView `json:"candidates"`
	// Dimensions are the ones ranked; Symptoms the attributes left out, or
	// some of whose values were, as how failures show rather than why: the
	// failure reasons name them, or only the events showing a failure carry
	// the value.
	Dimensions []string `json:"dimensions"`
	Symptoms   []string `json:"symptoms"`
	// Truncated: the window held more than root_cause::max_events events;
	// the ranking read the first of them.
	Truncated bool `json:"truncated"`
}

// ThinBaseline: the window's healthy requests are a sample too small for
// the ranking to tell a cause from chance (kept ones that stand only for
// themselves are no sample).
func (v *rootCauseView) ThinBaseline() bool {
	return v.Failing > 0 && v.Healthy < thinBaseline && v.Total-v.Failing > v.Healthy
}

type candidateView struct {
	Dimensions map[string]string `json:"dimensions"`
	// Score is the evidence for the candidate in nats (how much it shortens
	// the description of the window's outcomes).
	Score float64 `json:"score"`
	// Failing and Total count the requests inside, Outside the others.
	Failing int         `json:"failing"`
	Total   int         `json:"total"`
	Outside outsideView `json:"outside"`
	// Equivalent are other values that mark (nearly) the same failing
	// requests (an instance and the GPU it owns, a router's target): the
	// counts cannot tell them from the candidate, the evidence may.
	Equivalent []map[string]string `json:"equivalent"`
	// Shared are values nearly all of its failing requests also carry, under
	// which requests fail at least twice as often as in the window, though
	// not all of them (the adapter whose cache misses are the candidate).
	Shared   []map[string]string `json:"shared"`
	Evidence []string            `json:"evidence"`
	Examples []string            `json:"examples"`
}

type outsideView struct {
	Failing int `json:"failing"`
	Total   int `json:"total"`
}

func (h *handler) loadRootCause(r *http.Request) (*rootCauseView, error) {
	store, from, to, err := h.windowGraph(r)
	if err != nil {
		return nil, err
	}
	return h.rank(r.Context(), store, from, to)
}

func (h *handler) rank(ctx context.Context, store eventgraph.Store, from, to time.Time) (*rootCauseView, error) {
	events, truncated, err := store.DimensionEvents(ctx, from, to, h.cfg.RootCause.MaxEvents)
	if err != nil {
		return nil, err
	}
	v, err := rankRootCauses(events, &h.cfg.RootCause)
	if err != nil {
		return nil, err
	}
	v.Window, v.Truncated = windowView{from, to}, truncated
	return v, nil
}

// rankingCache keeps the last ranking the overview showed, and ranks in
// the background: the overview never waits for a window's events. A window
// read again within rankingFresh, ending within rankingFresh of the last, is
// answered from it.
type rankingCache struct {
	mu      sync.Mutex
	at      time.Time
	view    *rootCauseView
	err     error // of the last background ranking
	running bool
	// ctx ends the background ranking at shutdown; close waits for it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

const rankingFresh = 30 * time.Second

func newRankingCache() *rankingCache {
	c := &rankingCache{}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// close stops a background ranking and waits for it.
func (c *rankingCache) close() {
	c.cancel()
	c.wg.Wait()
}

// overviewRanking returns the freshest ranking of the window it holds (nil
// when none), and whether a newer one is being made: a missing or stale one
// starts a ranking in the background, one at a time.
func (h *handler) overviewRanking(store eventgraph.Store, from, to time.Time) (*rootCauseView, bool, error) {
	c := h.rankings
	c.mu.Lock()
	defer c.mu.Unlock()
	now := h.now()
	v := c.view
	if v != nil && (v.Window.To.Sub(v.Window.From) != to.Sub(from) || to.Sub(v.Window.To).Abs() >= rankingFresh) {
		v = nil // another window's
	}
	if v != nil && now.Sub(c.at) < rankingFresh {
		return v, false, nil
	}
	if !c.running {
		c.running = true
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			ranked, err := h.rank(c.ctx, store, from, to)
			c.mu.Lock()
			defer c.mu.Unlock()
			c.running, c.err = false, err
			if err == nil {
				c.at, c.view = h.now(), ranked
			}
		}()
	}
	return v, true, c.err
}

// ranking holds a window's events and requests as dimension value codes.
type ranking struct {
	cfg      *RootCauseConfig
	dims     []string
	dimIndex map[string]int // -1: a name never ranked (a symptom, excluded)
	// fixed[d]: dimension d is one of fixedDims.
	fixed []bool
	// values[dim][code]; code 0 is the empty value (no event of the request has the dimension).
	values   [][]string
	valueIdx []map[string]uint16
	// terms[termStart[i]:termStart[i+1]] are event i's (dim, code) pairs.
	terms     []dimCode
	termStart []int32
	reqOf     []int32 // event -> request
	requests  []rankedRequest
	symptoms  map[string]bool
	// codes[q*len(dims)+d] is request q's value of dimension d (see project).
	codes []uint16
	// The events of request q are order[start[q]:start[q+1]].
	order, start []int32
	// late marks the events of a failing request after its failure showed.
	late []bool
}

type dimCode struct {
	dim  int32
	code uint16
}

type rankedRequest struct {
	id      string
	failed  bool
	weight  float64
	reasons []string
	// causedBy are the rules of the CAUSED edges into the events that
	// show its failure.
	causedBy []string
}

// rankRootCauses ranks the dimension values that explain a window's failing
// requests. Each request is a row weighted by its adjusted count (the
// requests sampling let it stand for), holding one value per dimension: the
// one value its events carry, or, where they carry several (the hosts of
// its services), the one under which requests fail most. The subgroup
// search (internal/rootcause) finds the values, alone or in pairs, under
// which the failing share rises most, greedily.
func rankRootCauses(events []eventgraph.DimensionEvent, cfg *RootCauseConfig) (*rootCauseView, error) {
	rk := newRanking(events, cfg)
	v := &rootCauseView{Candidates: []candidateView{}, Dimensions: []string{}, Symptoms: slices.Sorted(maps.Keys(rk.symptoms))}
	var failing, total float64
	for _, q := range rk.requests {
		total += q.weight
		if q.failed {
			failing++
		} else {
			v.Healthy++
		}
	}
	v.Failing, v.Total = int(failing), int(math.Round(total))
	if failing == 0 || failing == float64(len(rk.requests)) {
		return v, nil
	}
	rk.project(failing / total)
	v.Dimensions = rk.rankedDims()
	sets := rk.termSets()
	found := rootcause.Subgroups(rk.rows(v.Dimensions, sets), rootcause.SubgroupOptions{MaxResults: maxRootCauses})
	for _, f := range found {
		v.Candidates = append(v.Candidates, rk.candidate(f.Element, f.Score, int(failing), total, sets))
	}
	return v, nil
}

func newRanking(events []eventgraph.DimensionEvent, cfg *RootCauseConfig) *ranking {
	rk := &ranking{cfg: cfg, dimIndex: map[string]int{}, symptoms: map[string]bool{},
		termStart: make([]int32, 0, len(events)+1), reqOf: make([]int32, 0, len(events))}
	for i := range events {
		if f := events[i].Failure; f != nil {
			for _, s := range f.Symptoms {
				rk.symptoms[s] = true
			}
		}
	}
	reqIndex := map[string]int32{}
	for i := range events {
		e := &events[i]
		qi, ok := reqIndex[e.ReqID]
		if !ok {
			qi = int32(len(rk.requests))
			reqIndex[e.ReqID] = qi
			rk.requests = append(rk.requests, rankedRequest{id: e.ReqID, weight: 1})
		}
		q := &rk.requests[qi]
		q.failed = q.failed || e.RequestFailed
		q.weight = max(q.weight, e.AdjustedCount)
		if f := e.Failure; f != nil {
			if q.reasons == nil && len(f.Reasons) > 0 {
				q.reasons = f.Reasons
			}
			for _, rule := range f.CausedBy {
				if !slices.Contains(q.causedBy, rule) {
					q.causedBy = append(q.causedBy, rule)
				}
			}
		}
		rk.reqOf = append(rk.reqOf, qi)
		rk.termStart = append(rk.termStart, int32(len(rk.terms)))
		rk.addEvent(e)
	}
	rk.termStart = append(rk.termStart, int32(len(rk.terms)))
	rk.indexByRequest()
	rk.markLate(events)
	rk.dropPerRecord(events)
	rk.dropSymptomValues(events)
	rk.dropModelFamilies()
	return rk
}

// dropPerRecord leaves out the attributes that describe a record rather
// than the work: those whose value changes between the records one service
// writes for one request (a log level, a message, a logger) in more than 1%
// of the requests that carry them. A version, an adapter, a GPU or a region
// stays the same across a service's records of a request.
func (rk *ranking) dropPerRecord(events []eventgraph.DimensionEvent) {
	// Per request, the first value each (service, dimension) showed.
	type seen struct {
		service string
		dim     int32
		code    uint16
		varied  bool
	}
	var firsts []seen
	varies, carried := make([]int, len(rk.dims)), make([]int, len(rk.dims))
	for q := range rk.requests {
		firsts = firsts[:0]
		for _, i := range rk.eventsOf(q) {
			service := events[i].Service
			for _, t := range rk.eventTerms(int(i)) {
				k := slices.IndexFunc(firsts, func(f seen) bool { return f.dim == t.dim && f.service == service })
				switch {
				case k < 0:
					firsts = append(firsts, seen{service: service, dim: t.dim, code: t.code})
					carried[t.dim]++
				case firsts[k].code != t.code && !firsts[k].varied:
					firsts[k].varied = true
					varies[t.dim]++
				}
			}
		}
	}
	perRecord := make([]bool, len(rk.dims))
	for d := range rk.dims {
		perRecord[d] = !rk.fixed[d] && varies[d]*100 > carried[d]
	}
	rk.keepTerms(func(t dimCode) bool { return !perRecord[t.dim] })
}

// keepTerms keeps the events' values that keep says to.
func (rk *ranking) keepTerms(keep func(dimCode) bool) {
	kept := rk.terms[:0]
	start := int32(0)
	for i := range rk.reqOf {
		from, to := rk.termStart[i], rk.termStart[i+1]
		rk.termStart[i] = start
		for _, t := range rk.terms[from:to] {
			if keep(t) {
				kept = append(kept, t)
				start++
			}
		}
	}
	rk.termStart[len(rk.reqOf)] = start
	rk.terms = kept
}

// dropSymptomValues leaves out the discovered values that no healthy
// request carries and that a failing request carries only once it fails:
// on records that report the error themselves (level=ERROR, an error
// message) or after the first of them (a retry's verdict, a cleanup). That is how a failure shows, not what
// caused it; a cause (a version, a template, an adapter, a GPU) is there by
// the time the failure shows. The golden fields, service.name and host.name
// are context by design and always stay.
func (rk *ranking) dropSymptomValues(events []eventgraph.DimensionEvent) {
	firstError := make([]time.Time, len(rk.requests))
	for i := range events {
		q := rk.reqOf[i]
		if events[i].ReportsError && (firstError[q].IsZero() || events[i].Time.Before(firstError[q])) {
			firstError[q] = events[i].Time
		}
	}
	type seen struct{ afterFailing, other bool }
	flags := map[dimCode]*seen{}
	for i := range events {
		e := &events[i]
		q := rk.reqOf[i]
		after := e.RequestFailed && (e.ReportsError || (!firstError[q].IsZero() && e.Time.After(firstError[q])))
		for _, t := range rk.eventTerms(i) {
			if rk.fixed[t.dim] {
				continue
			}
			f := flags[t]
			if f == nil {
				f = &seen{}
				flags[t] = f
			}
			if after {
				f.afterFailing = true
			} else {
				f.other = true
			}
		}
	}
	symptom := map[dimCode]bool{}
	for t, f := range flags {
		if f.afterFailing && !f.other {
			symptom[t] = true
			rk.symptoms[rk.dims[t.dim]] = true
		}
	}
	rk.keepTerms(func(t dimCode) bool { return !symptom[t] })
}

// fixedDims are the dimensions every event has a field for. The service and
// the stage are not among them: every request passes several, and where a
// failure shows is what its reasons and its timeline say.
var fixedDims = []string{string(semconv.HostNameKey), golden.GPUID, golden.ModelVer, InputHashPrefixDim}

func (rk *ranking) addEvent(e *eventgraph.DimensionEvent) {
	prefix := ""
	if len(e.InputHash) >= rk.cfg.InputHashPrefix {
		prefix = e.InputHash[:rk.cfg.InputHashPrefix]
	}
	for i, value := range []string{e.Host, e.GPU, e.ModelVer, prefix} {
		rk.add(fixedDims[i], value)
	}
	for _, d := range e.Dims {
		name, value, ok := strings.Cut(d, "=")
		if ok && !slices.Contains(fixedDims, name) {
			rk.add(name, value)
		}
	}
}

func (rk *ranking) add(name, value string) {
	if value == "" {
		return
	}
	d, ok := rk.dimIndex[name]
	if !ok {
		d = len(rk.dims)
		if rk.symptoms[name] || slices.Contains(rk.cfg.Exclude, name) ||
			(len(rk.cfg.Include) > 0 && !slices.Contains(rk.cfg.Include, name)) {
			d = -1
		}
		rk.dimIndex[name] = d
		if d < 0 {
			return
		}
		rk.dims = append(rk.dims, name)
		rk.fixed = append(rk.fixed, slices.Contains(fixedDims, name))
		rk.values = append(rk.values, []string{""})
		rk.valueIdx = append(rk.valueIdx, map[string]uint16{"": 0})
	}
	if d < 0 {
		return
	}
	code, ok := rk.valueIdx[d][value]
	if !ok {
		if len(rk.values[d]) > maxDimensionValues {
			return // counted as too many below
		}
		code = uint16(len(rk.values[d]))
		rk.valueIdx[d][value] = code
		rk.values[d] = append(rk.values[d], value)
	}
	rk.terms = append(rk.terms, dimCode{int32(d), code})
}

func (rk *ranking) eventTerms(i int) []dimCode { return rk.terms[rk.termStart[i]:rk.termStart[i+1]] }

// project gives each request one value per dimension: the value its events
// carry, or of several the one whose requests fail most in the window
// (smoothed toward rate, so a value seen on few requests is not the riskiest
// by chance).
func (rk *ranking) project(rate float64) {
	nd := len(rk.dims)
	var failW, totW [][]float64
	for d := range rk.dims {
		failW = append(failW, make([]float64, len(rk.values[d])))
		totW = append(totW, make([]float64, len(rk.values[d])))
	}
	rk.forEachRequestTerm(func(q int, t dimCode) {
		totW[t.dim][t.code] += rk.requests[q].weight
		if rk.requests[q].failed {
			failW[t.dim][t.code] += rk.requests[q].weight
		}
	})
	const prior = 5.0
	risk := func(t dimCode) float64 { return (failW[t.dim][t.code] + prior*rate) / (totW[t.dim][t.code] + prior) }
	rk.codes = make([]uint16, len(rk.requests)*nd)
	rk.forEachRequestTerm(func(q int, t dimCode) {
		cur := &rk.codes[q*nd+int(t.dim)]
		if *cur == 0 || risk(t) > risk(dimCode{t.dim, *cur}) {
			*cur = t.code
		}
	})
}

// forEachRequestTerm calls f once for each distinct value a request's events carry.
func (rk *ranking) forEachRequestTerm(f func(q int, t dimCode)) {
	var seen []dimCode
	for q := range rk.requests {
		seen = seen[:0]
		for _, i := range rk.eventsOf(q) {
			if rk.late[i] {
				continue
			}
			for _, t := range rk.eventTerms(int(i)) {
				if !slices.Contains(seen, t) {
					seen = append(seen, t)
					f(q, t)
				}
			}
		}
	}
}

// dropModelFamilies leaves out a model_ver that names only a family whose
// versions the window's requests name (llama3-8b beside llama3-8b-v2.2.0):
// it is the model a client asked for, written where no answer named the
// version, so it says less than they do, and on failed calls alone it would
// look like their cause.
func (rk *ranking) dropModelFamilies() {
	d, ok := rk.dimIndex[golden.ModelVer]
	if !ok || d < 0 {
		return
	}
	families := map[string]bool{}
	for _, v := range rk.values[d][1:] {
		if family := golden.ModelFamily(v); family != v {
			families[family] = true
		}
	}
	rk.keepTerms(func(t dimCode) bool { return int(t.dim) != d || !families[rk.values[d][t.code]] })
}

// eventsOf are request q's events.
func (rk *ranking) eventsOf(q int) []int32 { return rk.order[rk.start[q]:rk.start[q+1]] }

// indexByRequest sorts the events by request (a counting sort).
func (rk *ranking) indexByRequest() {
	rk.start = make([]int32, len(rk.requests)+1)
	for _, q := range rk.reqOf {
		rk.start[q+1]++
	}
	for q := range rk.requests {
		rk.start[q+1] += rk.start[q]
	}
	next := slices.Clone(rk.start[:len(rk.requests)])
	rk.order = make([]int32, len(rk.reqOf))
	for i, q := range rk.reqOf {
		rk.order[next[q]] = int32(i)
		next[q]++
	}
}

// markLate marks the events of failing requests that start after every
// event that shows the failure (the end of the last span that shows it, or
// the last record that does): a value written only once a request had failed
// (the status its edge logs at the end) describes the failure, not its cause.
// Not after the first: a failure's place is every record of its stage, the
// first of which may end before the work that failed began.
func (rk *ranking) markLate(events []eventgraph.DimensionEvent) {
	rk.late = make([]bool, len(events))
	for q := range rk.requests {
		var shown time.Time
		for _, i := range rk.eventsOf(q) {
			if e := &events[i]; e.EventFailed {
				at := e.Time
				if e.End.After(at) {
					at = e.End
				}
				if at.After(shown) {
					shown = at
				}
			}
		}
		if shown.IsZero() {
			continue
		}
		for _, i := range rk.eventsOf(q) {
			rk.late[i] = events[i].Time.After(shown)
		}
	}
}

func (rk *ranking) code(q, d int) uint16 { return rk.codes[q*len(rk.dims)+d] }

// rankedDims are the dimensions with at least two values in the window:
// one value everywhere splits nothing.
func (rk *ranking) rankedDims() []string {
	var out []string
	for d, name := range rk.dims {
		values := map[uint16]bool{}
		for q := range rk.requests {
			values[rk.code(q, d)] = true
		}
		if len(rk.values[d]) <= maxDimensionValues+1 && len(values) >= 2 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// rows are the requests with their values of the ranked dimensions, as the
// subgroup search reads them. A value only one request carries is left out:
// it cannot show that failures concentrate under it, and every value named
// raises the cost of naming any (an identifier such as a response id, one
// value per request, would drown a cause in a small window).
func (rk *ranking) rows(rankedDims []string, sets map[dimCode]termCount) []rootcause.Row {
	ranked := map[string]bool{}
	for _, d := range rankedDims {
		ranked[d] = true
	}
	rows := make([]rootcause.Row, len(rk.requests))
	for q := range rk.requests {
		r := &rows[q]
		r.Weight, r.Hit = rk.requests[q].weight, rk.requests[q].failed
		for d, name := range rk.dims {
			if c := rk.code(q, d); c != 0 && ranked[name] && sets[dimCode{int32(d), c}].requests > 1 {
				r.Terms = append(r.Terms, rootcause.Term{Dim: name, Value: rk.values[d][c]})
			}
		}
	}
	return rows
}

// termCount counts the requests under a value: the failing ones, and all
// of them by their weights.
type termCount struct {
	requests, failing int
	total             int64
}

// termSets counts the requests under every value of every dimension.
func (rk *ranking) termSets() map[dimCode]termCount {
	sets := map[dimCode]termCount{}
	nd := len(rk.dims)
	for q := range rk.requests {
		for d := range nd {
			c := rk.codes[q*nd+d]
			if c == 0 {
				continue
			}
			t := dimCode{int32(d), c}
			k := sets[t]
			k.requests++
			k.total += int64(math.Round(rk.requests[q].weight))
			if rk.requests[q].failed {
				k.failing++
			}
			sets[t] = k
		}
	}
	return sets
}

// candidate counts the requests whose values include every value of the
// element, and gathers their evidence and the values equivalent to it.
func (rk *ranking) candidate(element rootcause.Element, score float64, failing int, total float64, sets map[dimCode]termCount) candidateView {
	want := make([]dimCode, len(element))
	v := candidateView{Dimensions: map[string]string{}, Score: math.Round(score*100) / 100,
		Equivalent: []map[string]string{}, Evidence: []string{}, Examples: []string{}}
	for i, t := range element {
		d := rk.dimIndex[t.Dim]
		want[i] = dimCode{int32(d), rk.valueIdx[d][t.Value]}
		v.Dimensions[t.Dim] = t.Value
	}
	var insideTotal float64
	var key termCount
	reasons, causes := map[string]int{}, map[string]int{}
	inside := make([]bool, len(rk.requests))
	for q := range rk.requests {
		if inside[q] = rk.matches(q, element); !inside[q] {
			continue
		}
		r := &rk.requests[q]
		insideTotal += r.weight
		key.total += int64(math.Round(r.weight))
		if !r.failed {
			continue
		}
		v.Failing++
		key.failing++
		if len(v.Examples) < maxExamples {
			v.Examples = append(v.Examples, r.id)
		}
		for _, reason := range r.reasons {
			reasons[failure.ReasonGroup(reason)]++
		}
		for _, rule := range r.causedBy {
			causes[rule]++
		}
	}
	v.Total = int(math.Round(insideTotal))
	v.Outside = outsideView{Failing: failing - v.Failing, Total: int(math.Round(total - insideTotal))}
	v.Evidence = append(v.Evidence, fmt.Sprintf("%d of %d requests failed with these values (%s); %d of %d without them (%s)",
		v.Failing, v.Total, share(float64(v.Failing), insideTotal), v.Outside.Failing, v.Outside.Total,
		share(float64(v.Outside.Failing), total-insideTotal)))
	for _, r := range mostCommon(reasons, maxReasonEvidence) {
		v.Evidence = append(v.Evidence, fmt.Sprintf("%s (%d of its failing requests)", r, reasons[r]))
	}
	for _, rule := range mostCommon(causes, maxReasonEvidence) {
		v.Evidence = append(v.Evidence, fmt.Sprintf("CAUSED by rule %s into the events that show the failure (%d of its failing requests)",
			rule, causes[rule]))
	}
	equivalent, overlap := rk.equivalents(func(q int) bool { return inside[q] }, key, want, sets)
	for _, u := range equivalent {
		v.Equivalent = append(v.Equivalent, map[string]string{rk.dims[u.dim]: rk.values[u.dim][u.code]})
	}
	// A pair's values may each have their own equivalents (an instance and
	// the GPU it owns): the pair with one of them swapped is equivalent too.
	for i, t := range want {
		if len(want) < 2 {
			break
		}
		one := func(q int) bool { return rk.code(q, int(t.dim)) == t.code }
		pairEquivalent, _ := rk.equivalents(one, sets[t], want, sets)
		equivalent = append(equivalent, pairEquivalent...)
		for _, u := range pairEquivalent {
			swapped := maps.Clone(v.Dimensions)
			delete(swapped, element[i].Dim)
			if _, taken := swapped[rk.dims[u.dim]]; !taken {
				swapped[rk.dims[u.dim]] = rk.values[u.dim][u.code]
				v.Equivalent = append(v.Equivalent, swapped)
			}
		}
	}
	slices.SortFunc(v.Equivalent, func(a, b map[string]string) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	v.Shared = rk.shared(overlap, v.Failing, float64(failing)/total, slices.Concat(want, equivalent), sets)
	return v
}

// equivalents are the values, other than those of not, carried by (nearly)
// the same requests as the requests inside (counted in key): the same
// failing ones, and as much of all the weight both ways. overlap counts,
// for every value, the failing requests inside that carry it.
func (rk *ranking) equivalents(inside func(q int) bool, key termCount, not []dimCode, sets map[dimCode]termCount) ([]dimCode, map[dimCode]int) {
	overlap := map[dimCode]int{}
	weight := map[dimCode]float64{}
	for q := range rk.requests {
		if !inside(q) {
			continue
		}
		for d := range rk.dims {
			if c := rk.code(q, d); c != 0 {
				t := dimCode{int32(d), c}
				weight[t] += rk.requests[q].weight
				if rk.requests[q].failed {
					overlap[t]++
				}
			}
		}
	}
	var out []dimCode
	for t, n := range overlap {
		k := sets[t]
		if float64(n) >= equivalentShare*float64(max(k.failing, key.failing)) &&
			weight[t] >= equivalentShare*float64(max(k.total, key.total)) && !slices.Contains(not, t) {
			out = append(out, t)
		}
	}
	return out, overlap
}

// maxShared bounds the shared values a candidate lists.
const maxShared = 3

// shared are the values, other than those of not, that (nearly) every one
// of a candidate's failing requests carries and under which requests fail at
// least twice as often as in the window, though more requests carry them:
// an adapter whose cold loads are the candidate. Riskiest first.
func (rk *ranking) shared(overlap map[dimCode]int, failing int, rate float64, not []dimCode, sets map[dimCode]termCount) []map[string]string {
	risk := func(t dimCode) float64 { return float64(sets[t].failing) / float64(max(sets[t].total, 1)) }
	var found []dimCode
	for t, n := range overlap {
		if float64(n) >= equivalentShare*float64(failing) && risk(t) >= 2*rate && !slices.Contains(not, t) {
			found = append(found, t)
		}
	}
	slices.SortFunc(found, func(a, b dimCode) int {
		return cmp.Or(cmp.Compare(risk(b), risk(a)), cmp.Compare(rk.dims[a.dim], rk.dims[b.dim]))
	})
	out := []map[string]string{}
	for _, t := range found[:min(len(found), maxShared)] {
		out = append(out, map[string]string{rk.dims[t.dim]: rk.values[t.dim][t.code]})
	}
	return out
}

// equivalentShare is the share of the failing requests two values must
// have in common to be told apart by nothing the counts say.
const equivalentShare = 0.95

func share(part, whole float64) string {
	if whole <= 0 {
		return "no requests"
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}

// mostCommon are the n keys counted most, most first.
func mostCommon(counts map[string]int, n int) []string {
	keys := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	return keys[:min(n, len(keys))]
}

// matches says whether request q has every value of the element.
func (rk *ranking) matches(q int, e rootcause.Element) bool {
	for _, t := range e {
		d := rk.dimIndex[t.Dim]
		if rk.code(q, d) != rk.valueIdx[d][t.Value] {
			return false
		}
	}
	return true
}
