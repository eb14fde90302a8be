package rcaextension

import (
	"encoding/json"
	"errors"
	"fmt"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor"
)

// maxReqIDBytes bounds a req_id in a path: reqidstitch never indexes longer ones.
const maxReqIDBytes = 256

// handler answers the page's and the API's requests from the event graph.
type handler struct {
	cfg        *Config
	store      func() (eventgraph.Store, bool)
	failureMap func() (reqsamplingprocessor.FailureMap, bool)
	now        func() time.Time
	mux        *http.ServeMux
	rankings   *rankingCache
}

func newHandler(cfg *Config, store func() (eventgraph.Store, bool), failureMap func() (reqsamplingprocessor.FailureMap, bool),
	now func() time.Time,
) *handler {
	h := &handler{cfg: cfg, store: store, failureMap: failureMap, now: now, mux: http.NewServeMux(), rankings: newRankingCache()}
	// Every view is one loader, answered as JSON under /api and as a page.
	route(h.mux, "/requests/{req_id}", h.loadRequest, "request.html", requestPageOf)
	route(h.mux, "/requests/{req_id}/compare", h.loadComparison, "compare.html", comparePageOf)
	route(h.mux, "/inputs", h.loadInputs, "inputs.html", func(v *inputsView) any { return v })
	route(h.mux, "/rootcause", h.loadRootCause, "rootcause.html", func(v *rootCauseView) any { return v })
	h.mux.HandleFunc("GET /api/failing", serveJSON(h.loadFailing))
	h.mux.HandleFunc("GET /{$}", servePage(h.loadOverview, "overview.html", overviewPageOf))
	return h
}

// route serves load's view at /api+path as JSON and at path as the page
// template name renders from page(view).
func route[T any](mux *http.ServeMux, path string, load func(*http.Request) (T, error), name string, page func(T) any) {
	mux.HandleFunc("GET /api"+path, serveJSON(load))
	mux.HandleFunc("GET "+path, servePage(load, name, page))
}

func serveJSON[T any](load func(*http.Request) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := load(r)
		if err != nil {
			status, message := statusOf(err)
			writeJSON(w, status, map[string]string{"error": message})
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// close stops the work the handler does in the background.
func (h *handler) close() { h.rankings.close() }

// httpError is an answer other than 200, with the message a person reads.
type httpError struct {
	status  int
	message string
}

func (e *httpError) Error() string { return e.message }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// graph returns the store, or why there is none.
func (h *handler) graph() (eventgraph.Store, error) {
	if s, ok := h.store(); ok {
		return s, nil
	}
	return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf(
		"no eventgraph exporter %q is running in this collector: add it to a pipeline, or set the rca extension's graph to the one that is", h.cfg.Graph)}
}

// reqID reads the path's req_id.
func reqID(r *http.Request) (string, error) {
	id := r.PathValue("req_id")
	if id == "" || len(id) > maxReqIDBytes || !utf8.ValidString(id) {
		return "", badRequest("req_id must be 1 to %d bytes of UTF-8", maxReqIDBytes)
	}
	return id, nil
}

// window reads from and to (RFC 3339 or unix milliseconds); without them the
// window is the configured one up to now. It is bounded by max_window.
func (h *handler) window(r *http.Request) (from, to time.Time, err error) {
	q := r.URL.Query()
	to = h.now()
	if s := q.Get("to"); s != "" {
		if to, err = parseTime(s); err != nil {
			return from, to, badRequest("to: %v", err)
		}
	}
	from = to.Add(-h.cfg.Window)
	if s := q.Get("from"); s != "" {
		if from, err = parseTime(s); err != nil {
			return from, to, badRequest("from: %v", err)
		}
	}
	switch {
	case !from.Before(to):
		return from, to, badRequest("from must be before to")
	case to.Sub(from) > h.cfg.MaxWindow:
		return from, to, badRequest("the window is longer than max_window (%s): narrow from and to", h.cfg.MaxWindow)
	}
	return from, to, nil
}

func parseTime(s string) (time.Time, error) {
	if len(s) > 64 {
		return time.Time{}, errors.New("too long for a time")
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("want RFC 3339 or unix milliseconds")
	}
	return t, nil
}

// requestView is one request as the API and the page show it.
type requestView struct {
	ReqID string `json:"req_id"`
	// Key is what ReqID is: "req_id", the id its records carry, or
	// "trace", the key of the trace that started a request whose records
	// carry none (eventgraph.KeyAttr).
	Key     string             `json:"key"`
	Failed  bool               `json:"failed"`
	Reasons []string           `json:"reasons"`
	Events  []eventView        `json:"events"`
	Edges   []edgeView         `json:"edges"`
	events  []eventgraph.Event // for the page's timeline
}

type eventView struct {
	EventID    string         `json:"event_id"`
	Time       time.Time      `json:"time"`
	End        *time.Time     `json:"end,omitempty"`
	Service    string         `json:"service.name"`
	Stage      string         `json:"stage"`
	Kind       string         `json:"kind"`
	Name       string         `json:"name"`
	Message    string         `json:"message"`
	Failed     bool           `json:"failed"`
	Attributes map[string]any `json:"attributes"`
}

type edgeView struct {
	From string `json:"from"`
	To   string `json:"to"`
	Type string `json:"type"`
	Rule string `json:"rule,omitempty"`
}

// loadRequest reads one request's events; a req_id the graph does not hold is a 404.
func (h *handler) loadRequest(r *http.Request) (*requestView, error) {
	id, err := reqID(r)
	if err != nil {
		return nil, err
	}
	store, err := h.graph()
	if err != nil {
		return nil, err
	}
	events, err := store.Timeline(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return nil, &httpError{http.StatusNotFound, "the graph holds no request with this req_id (not kept by sampling, not yet written, or past retention)"}
	}
	v := &requestView{ReqID: id, Key: golden.ReqID, Reasons: []string{}, Events: make([]eventView, len(events)), events: events}
	for i := range events {
		e := &events[i]
		v.Failed = v.Failed || e.Failed
		if e.Attrs[eventgraph.KeyAttr] == golden.ReqIDFromTrace {
			v.Key = golden.ReqIDFromTrace
		}
		if reasons, ok := e.Attrs[failure.ReasonsAttr].([]string); ok {
			for _, reason := range reasons {
				if !slices.Contains(v.Reasons, reason) {
					v.Reasons = append(v.Reasons, reason)
				}
			}
		}
		v.Events[i] = viewEvent(e)
	}
	for _, edge := range eventgraph.RequestEdges(events) {
		v.Edges = append(v.Edges, edgeView{From: edge.From, To: edge.To, Type: string(edge.Type), Rule: edge.Rule})
	}
	if v.Edges == nil {
		v.Edges = []edgeView{}
	}
	return v, nil
}

// The names viewEvent gives an event's severity and status: how the record
// says it went, not a field it carries.
const (
	severityTextKey   = "severity_text"
	severityNumberKey = "severity_number"
	statusKey         = "status"
)

// viewEvent puts an event's golden fields and attributes under the names
// they carry on the records.
func viewEvent(e *eventgraph.Event) eventView {
	attrs := make(map[string]any, len(e.Attrs)+8)
	for k, v := range e.Attrs {
		if k != failure.ReasonsAttr { // the request's, not the event's: in reasons
			attrs[k] = v
		}
	}
	put := func(k, v string) {
		if v != "" {
			attrs[k] = v
		}
	}
	put(golden.ReqID, e.ReqID)
	put(golden.ModelVer, e.ModelVer)
	put(golden.InputHash, e.InputHash)
	put(golden.GPUID, e.GPU)
	put(string(semconv.HostNameKey), e.Host)
	put(golden.TraceID, e.TraceID)
	put(golden.SpanID, e.SpanID)
	put(severityTextKey, e.SeverityText)
	put(statusKey, e.Status)
	if e.SeverityNumber != 0 {
		attrs[severityNumberKey] = e.SeverityNumber
	}
	if len(e.Dims) > 0 {
		attrs[eventgraph.DimsAttr] = e.Dims
	}
	if e.AdjustedCount != 0 {
		attrs[golden.SamplingAdjustedCount] = e.AdjustedCount
	}
	v := eventView{EventID: e.ID, Time: e.Time, Service: e.Service, Stage: e.Stage, Kind: string(e.Kind), Name: e.Name,
		Message: e.Message, Failed: e.Failed, Attributes: attrs}
	if !e.End.IsZero() {
		end := e.End
		v.End = &end
	}
	return v
}

// failingView lists the failing requests of a window, newest first.
type failingView struct {
	Window windowView `json:"window"`
	// Failing counts the window's failing requests; Intervals spreads them
	// over the window by first event.
	Failing   int        `json:"failing"`
	Intervals []interval `json:"intervals"`
	// Drifts are the schema changes goldenfield found in the window, on
	// the same time axis.
	Drifts    []driftView   `json:"drifts"`
	Requests  []requestItem `json:"requests"`
	Truncated bool          `json:"truncated"`
}

// driftView is one schema change: a model version of a service's stage
// stopped writing fields its predecessor wrote.
type driftView struct {
	Time        time.Time `json:"time"`
	Service     string    `json:"service.name"`
	Stage       string    `json:"stage"`
	OldModelVer string    `json:"old_model_ver"`
	NewModelVer string    `json:"new_model_ver"`
	FieldsLost  []string  `json:"fields_lost"`
	Message     string    `json:"message"`
}

func viewDrift(e *eventgraph.Event) driftView {
	old, _ := e.Attrs[golden.DriftOldModelVer].(string)
	lost, _ := e.Attrs[golden.DriftFieldsLost].([]string)
	if lost == nil {
		lost = []string{}
	}
	return driftView{Time: e.Time, Service: e.Service, Stage: e.Stage, OldModelVer: old, NewModelVer: e.ModelVer,
		FieldsLost: lost, Message: e.Message}
}

// interval is one slice of a window and the failing requests that began in it.
type interval struct {
	From    time.Time `json:"from"`
	Failing int       `json:"failing"`
}

// intervals is how many slices a window's chart has.
const intervals = 30

func spread(from, to time.Time, requests []eventgraph.Request) []interval {
	step := to.Sub(from) / intervals
	out := make([]interval, intervals)
	for i := range out {
		out[i].From = from.Add(time.Duration(i) * step)
	}
	for _, r := range requests {
		i := int(r.First.Sub(from) / max(step, 1))
		out[min(max(i, 0), intervals-1)].Failing++
	}
	return out
}

type windowView struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

type requestItem struct {
	ReqID string    `json:"req_id"`
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// windowGraph reads the request's window and returns the store to read it from.
func (h *handler) windowGraph(r *http.Request) (store eventgraph.Store, from, to time.Time, err error) {
	if from, to, err = h.window(r); err != nil {
		return nil, from, to, err
	}
	store, err = h.graph()
	return store, from, to, err
}

// overviewView is the first screen: the failing requests and the top of
// the ranking (nil until the window's first one is made; Refreshing while a
// newer one is; RankingError when the last one failed).
type overviewView struct {
	*failingView
	Ranking      *rootCauseView
	Refreshing   bool
	RankingError string
}

// overviewCandidates is how many of the ranking's candidates the overview shows.
const overviewCandidates = 3

func (h *handler) loadOverview(r *http.Request) (*overviewView, error) {
	failing, err := h.loadFailing(r)
	if err != nil {
		return nil, err
	}
	store, err := h.graph()
	if err != nil {
		return nil, err
	}
	ranking, refreshing, rankErr := h.overviewRanking(store, failing.Window.From, failing.Window.To)
	v := &overviewView{failingView: failing, Refreshing: refreshing}
	if rankErr != nil {
		_, v.RankingError = statusOf(rankErr)
	}
	if ranking != nil {
		top := *ranking
		top.Candidates = top.Candidates[:min(len(top.Candidates), overviewCandidates)]
		v.Ranking = &top
	}
	return v, nil
}

func (h *handler) loadFailing(r *http.Request) (*failingView, error) {
	store, from, to, err := h.windowGraph(r)
	if err != nil {
		return nil, err
	}
	failed, err := store.Requests(r.Context(), from, to, true)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(failed, func(a, b eventgraph.Request) int { return b.First.Compare(a.First) })
	drifts, err := store.SchemaDrifts(r.Context(), from, to)
	if err != nil {
		return nil, err
	}
	v := &failingView{Window: windowView{from, to}, Failing: len(failed), Intervals: spread(from, to, failed), Requests: []requestItem{},
		Drifts: make([]driftView, len(drifts))}
	for i := range drifts {
		v.Drifts[i] = viewDrift(&drifts[i])
	}
	if len(failed) > h.cfg.MaxRequests {
		failed, v.Truncated = failed[:h.cfg.MaxRequests], true
	}
	for _, f := range failed {
		v.Requests = append(v.Requests, requestItem{ReqID: f.ReqID, First: f.First, Last: f.Last})
	}
	return v, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// statusOf is the answer's status and message: a store that fails is a 502,
// with its error, which names no request data.
func statusOf(err error) (int, string) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, he.message
	}
	return http.StatusBadGateway, "reading the event graph failed: " + err.Error()
}
