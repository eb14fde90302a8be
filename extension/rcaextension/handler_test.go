package rcaextension

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/sqlitestore"
	"github.com/loom-otel/loom/internal/eventgraph/storetest"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
)

// hostile is a request whose id, service and message are attacks on a page.
const (
	hostileID      = `req-<script>alert(1)</script>`
	hostileMessage = `<img src=x onerror=alert(2)> "quoted" </svg><script>alert(3)</script>`
)

// openStore writes the conformance fixture (a failing request with a cause
// and async work, a healthy one), a hostile request and the verdict's
// reasons into a real embedded store.
func openStore(t testing.TB) eventgraph.Backend {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "graph.db"), sqlitestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close(ctx) })
	events := storetest.Fixture()
	for i := range events {
		if events[i].ReqID == storetest.ReqFailing {
			events[i].Attrs = withAttr(events[i].Attrs, failure.ReasonsAttr, []string{"error_severity: at postproc/filter (postproc)"})
		}
	}
	events = append(events, eventgraph.Event{ID: storetest.ID(500), Kind: eventgraph.KindLog, Time: storetest.T0.Add(time.Second),
		ReqID: hostileID, Service: hostileMessage, Stage: hostileMessage, Message: hostileMessage, SeverityNumber: 17, Failed: true},
		// goldenfield's finding that a model version stopped writing a field, with a hostile message.
		eventgraph.Event{ID: storetest.ID(501), Kind: eventgraph.KindLog, Time: storetest.T0.Add(1500 * time.Millisecond), Service: "model",
			Stage: "model/forward", ModelVer: "llama3-8b-v2.3.2", SeverityNumber: 13, Message: hostileMessage,
			Attrs: map[string]any{golden.DriftOldModelVer: "llama3-8b-v2.3.1", golden.DriftFieldsLost: []string{"raw_output_hash"}}})
	require.NoError(t, store.Write(ctx, events))
	return store
}

func withAttr(m map[string]any, k string, v any) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	m[k] = v
	return m
}

// serve runs the handler over store (nil: no eventgraph exporter running),
// its clock a minute after the fixture.
func serve(t testing.TB, store eventgraph.Store) *httptest.Server {
	cfg := createDefaultConfig().(*Config)
	lookup := func() (eventgraph.Store, bool) { return store, store != nil }
	h := newHandler(cfg, lookup, lookupFailureMap(cfg), func() time.Time { return storetest.T0.Add(time.Minute) })
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.close()
	})
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(body)
}

func TestAPIRequest(t *testing.T) {
	srv := serve(t, openStore(t))
	status, header, body := get(t, srv, "/api/requests/"+storetest.ReqFailing)
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "application/json", header.Get("Content-Type"))

	var got struct {
		ReqID   string   `json:"req_id"`
		Failed  bool     `json:"failed"`
		Reasons []string `json:"reasons"`
		Events  []struct {
			EventID    string         `json:"event_id"`
			Time       time.Time      `json:"time"`
			Service    string         `json:"service.name"`
			Stage      string         `json:"stage"`
			Kind       string         `json:"kind"`
			Name       string         `json:"name"`
			Message    string         `json:"message"`
			Attributes map[string]any `json:"attributes"`
		} `json:"events"`
		Edges []struct{ From, To, Type, Rule string } `json:"edges"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Equal(t, storetest.ReqFailing, got.ReqID)
	assert.True(t, got.Failed)
	assert.Equal(t, []string{"error_severity: at postproc/filter (postproc)"}, got.Reasons)
	require.Len(t, got.Events, 8)
	assert.Equal(t, storetest.ID(1), got.Events[0].EventID)
	assert.Equal(t, "gateway", got.Events[0].Service)
	assert.Equal(t, "span", got.Events[0].Kind)
	assert.Equal(t, "POST /v1/chat", got.Events[0].Name)
	assert.Equal(t, "llama3-8b-v2.3.2", got.Events[4].Attributes["model_ver"])
	assert.Equal(t, 10200.0, got.Events[4].Attributes["resource_usage.gpu_mem_mb"])
	assert.Equal(t, []any{"lora.adapter=sql-v1", "region=eu-west"}, got.Events[4].Attributes["eventgraph.dims"],
		"an event's dimensions show under their attribute's name")
	assert.Equal(t, "upstream timeout", got.Events[5].Message)
	assert.Contains(t, got.Edges, struct{ From, To, Type, Rule string }{storetest.ID(4), storetest.ID(5), "CAUSED", "cache_miss_trigger_inference"})
	assert.Contains(t, got.Edges, struct{ From, To, Type, Rule string }{storetest.ID(7), storetest.ID(1), "ASYNC_OF", ""})
	assert.Contains(t, got.Edges, struct{ From, To, Type, Rule string }{storetest.ID(3), storetest.ID(2), "CHILD_OF", ""})

	status, _, body = get(t, srv, "/api/requests/"+storetest.ReqHealthy)
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `"failed":false,"reasons":[]`)
}

func TestAPIErrors(t *testing.T) {
	srv := serve(t, openStore(t))
	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{"/api/requests/req-1715234890123-nosuch", http.StatusNotFound, "no request with this req_id"},
		{"/api/requests/" + strings.Repeat("x", 300), http.StatusBadRequest, "req_id must be 1 to 256 bytes"},
		{"/api/requests/" + url.PathEscape("\xff\xfe"), http.StatusBadRequest, "UTF-8"},
		{"/api/failing?from=yesterday", http.StatusBadRequest, "from: want RFC 3339 or unix milliseconds"},
		{"/api/failing?to=" + strings.Repeat("9", 100), http.StatusBadRequest, "to: too long"},
		{"/api/failing?from=2025-05-09T12:00:00Z&to=2025-05-09T11:00:00Z", http.StatusBadRequest, "from must be before to"},
		{"/api/failing?from=0&to=1746792000000", http.StatusBadRequest, "longer than max_window"},
	} {
		status, header, body := get(t, srv, tc.path)
		assert.Equal(t, tc.status, status, tc.path)
		assert.Equal(t, "application/json", header.Get("Content-Type"), tc.path)
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(body), &e), tc.path)
		assert.Contains(t, e.Error, tc.says, tc.path)
	}

	status, _, body := get(t, serve(t, nil), "/api/requests/"+storetest.ReqFailing)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, `no eventgraph exporter \"eventgraph\" is running`)
}

func TestAPIFailing(t *testing.T) {
	srv := serve(t, openStore(t))
	status, _, body := get(t, srv, "/api/failing")
	require.Equal(t, http.StatusOK, status, body)
	var got failingView
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Len(t, got.Requests, 2)
	assert.Equal(t, hostileID, got.Requests[0].ReqID, "newest first")
	assert.Equal(t, storetest.ReqFailing, got.Requests[1].ReqID)
	assert.Equal(t, storetest.T0.Add(time.Minute-15*time.Minute), got.Window.From.UTC())
	assert.Equal(t, 2, got.Failing)
	require.Len(t, got.Intervals, intervals)
	assert.Equal(t, 2, got.Intervals[28].Failing, "both began 14 minutes into the window (at T0)")
	require.Len(t, got.Drifts, 1)
	assert.Equal(t, driftView{Time: storetest.T0.Add(1500 * time.Millisecond), Service: "model", Stage: "model/forward",
		OldModelVer: "llama3-8b-v2.3.1", NewModelVer: "llama3-8b-v2.3.2", FieldsLost: []string{"raw_output_hash"}, Message: hostileMessage},
		got.Drifts[0], "on the same time axis as the failures")

	status, _, body = get(t, srv, "/api/failing?from="+storetest.T0.Add(2*time.Minute).Format(time.RFC3339)+"&to="+
		storetest.T0.Add(3*time.Minute).Format(time.RFC3339))
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"requests":[]`)
}

func TestPages(t *testing.T) {
	srv := serve(t, openStore(t))
	status, header, body := get(t, srv, "/")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "text/html; charset=utf-8", header.Get("Content-Type"))
	assert.Contains(t, header.Get("Content-Security-Policy"), "default-src 'none'")
	assert.Contains(t, body, `href="/requests/`+storetest.ReqFailing+`"`)
	assert.Contains(t, body, `<svg id="failing-chart"`)
	assert.Contains(t, body, "<strong>2</strong> failing requests in the window")
	assert.Contains(t, body, `id="ranking-pending"`, "the first load of a window does not wait for its ranking")

	status, _, body = get(t, srv, "/requests/"+storetest.ReqFailing)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `<svg class="timeline"`)
	assert.Contains(t, body, "error_severity: at postproc/filter (postproc)")
	assert.Contains(t, body, "vector-writer · async", "detached work in a lane of its own")
	assert.Equal(t, 4, strings.Count(body, `<rect class="bar`), "one bar per span")
	assert.Contains(t, body, `<circle class="mark failed"`, "the error log")
	assert.Contains(t, body, `upstream timeout`)

	status, _, body = get(t, srv, "/requests/req-1715234890123-nosuch")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, "no request with this req_id")
}

// Every value the page shows is stored literally and rendered as text.
func TestPagesEscapeWhatTheyShow(t *testing.T) {
	srv := serve(t, openStore(t))
	for _, path := range []string{"/", "/requests/" + url.PathEscape(hostileID)} {
		status, _, body := get(t, srv, path)
		require.Equal(t, http.StatusOK, status, path)
		assert.NotContains(t, body, "<script>alert", path)
		assert.NotContains(t, body, "<img src=x", path)
		assert.NotContains(t, body, "</svg><script>", path)
	}
	_, _, body := get(t, srv, "/requests/"+url.PathEscape(hostileID))
	assert.Contains(t, body, "&lt;img src=x onerror=alert(2)&gt;")
	_, _, body = get(t, srv, "/")
	assert.Contains(t, body, `<line class="drift"`, "the schema change marked on the chart")
	assert.Contains(t, body, "llama3-8b-v2.3.1 → llama3-8b-v2.3.2")
}

// A request whose records carry no req_id is keyed by its trace, and says so.
func TestARequestKeyedByItsTrace(t *testing.T) {
	store := openStore(t)
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	keyed := map[string]any{eventgraph.KeyAttr: golden.ReqIDFromTrace}
	require.NoError(t, store.Write(context.Background(), []eventgraph.Event{
		{ID: storetest.ID(600), Kind: eventgraph.KindSpan, Time: storetest.T0, End: storetest.T0.Add(time.Second), ReqID: trace,
			TraceID: trace, SpanID: "00f067aa0ba902b7", Service: "ts-order-service", Name: "GET /api/v1/orders", Status: "error", Failed: true, Attrs: keyed},
		{ID: storetest.ID(601), Kind: eventgraph.KindLog, Time: storetest.T0.Add(time.Millisecond), ReqID: trace,
			TraceID: trace, SpanID: "00f067aa0ba902b7", Service: "ts-order-service", Message: "order not found", SeverityNumber: 17, Failed: true, Attrs: keyed},
	}))
	srv := serve(t, store)
	status, _, body := get(t, srv, "/api/requests/"+trace)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"req_id":"`+trace+`","key":"trace"`)
	_, _, body = get(t, srv, "/api/requests/"+storetest.ReqFailing)
	assert.Contains(t, body, `"key":"req_id"`)

	_, _, body = get(t, srv, "/requests/"+trace)
	assert.Contains(t, body, `id="key">Keyed by its trace`)
	_, _, body = get(t, srv, "/")
	assert.Contains(t, body, `href="/requests/`+trace+`"`, "listed among the failing requests")
}
