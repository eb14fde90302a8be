package rcaextension

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/sqlitestore"
	"github.com/loom-otel/loom/internal/eventgraph/storetest"
	"github.com/loom-otel/loom/internal/golden"
)

// renderRequest is a request of an image service: a route span, a decode
// span that writes its digest, a store log line. withDigest false is the
// failure: the decoder stopped writing the digest and stored zero bytes.
func renderRequest(n int, at time.Time, withDigest bool, input string) []eventgraph.Event {
	id := fmt.Sprintf("req-1746792000%03d-%06d", n, n)
	ev := func(k int) string { return storetest.ID(1000*n + k) }
	decode := map[string]any{"resource_usage.latency_ms": 40.0}
	stored := map[string]any{"bytes.stored": 2_000_000.0}
	if withDigest {
		decode[eventgraph.FieldsAttr] = []string{"img.digest", "img.steps"}
	} else {
		decode[eventgraph.FieldsAttr] = []string{"img.steps"}
		stored["bytes.stored"] = 0.0
	}
	if withDigest { // given from the request's other records: never a difference
		stored[golden.DerivedAttr] = []string{golden.ModelVer}
	}
	trace := fmt.Sprintf("t%d", n)
	return []eventgraph.Event{
		{ID: ev(1), Kind: eventgraph.KindSpan, Time: at, End: at.Add(90 * time.Millisecond), ReqID: id, Stage: "route", Service: "front",
			Name: "POST /images", InputHash: input, TraceID: trace, SpanID: "a"},
		{ID: ev(2), Kind: eventgraph.KindSpan, Time: at.Add(10 * time.Millisecond), End: at.Add(50 * time.Millisecond), ReqID: id,
			Stage: "decode", Service: "painter", ModelVer: "sdxl-v1.0", Name: "decode", TraceID: trace, SpanID: "b", ParentSpanID: "a",
			Attrs: decode},
		{ID: ev(3), Kind: eventgraph.KindLog, Time: at.Add(60 * time.Millisecond), ReqID: id, Stage: "store", Service: "vault",
			Message: "stored", Failed: !withDigest, Attrs: stored, ModelVer: derivedModel(withDigest)},
	}
}

func derivedModel(derived bool) string {
	if derived {
		return "sdxl-v1.0"
	}
	return ""
}

func TestCompareWithTheNearestHealthyRequest(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "graph.db"), sqlitestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close(ctx) })
	t0 := storetest.T0
	var events []eventgraph.Event
	events = append(events, renderRequest(1, t0, false, "f00dbabe")...)                   // the failing one
	events = append(events, renderRequest(2, t0.Add(time.Second), true, "0000aaaa")...)   // closest, another input
	events = append(events, renderRequest(3, t0.Add(3*time.Second), true, "f00dbabe")...) // same input: the pick
	other := renderRequest(4, t0.Add(-time.Second), true, "f00dbabe")[:1]                 // the same input, another path
	events = append(events, other...)
	events = append(events, renderRequest(5, t0.Add(2*time.Hour), false, "f00dbabe")...) // alone in its hour
	require.NoError(t, store.Write(ctx, events))
	srv := serve(t, store)

	status, _, body := get(t, srv, "/api/requests/req-1746792000001-000001/compare")
	require.Equal(t, http.StatusOK, status, body)
	var got comparisonView
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Equal(t, "req-1746792000003-000003", got.Good)
	assert.Equal(t, []string{"the same places in the same order", "the same input_hash", "the same model_ver", "3.00 s apart"}, got.Match)
	require.NotEmpty(t, got.Differences)
	assert.Equal(t, difference{Kind: "missing", Service: "painter", Stage: "decode", Event: "span", Field: "img.digest", Good: present}, got.Differences[0],
		"the field the failure stopped writing comes first")
	assert.Contains(t, got.Differences, difference{Kind: "differs", Service: "vault", Stage: "store", Event: "log", Field: "bytes.stored", Bad: 0.0, Good: 2e6})
	for _, d := range got.Differences {
		assert.False(t, d.Field == golden.ModelVer && d.Stage == "store", "a derived field is no difference")
		assert.NotEqual(t, "resource_usage.latency_ms", d.Field, "the same latency does not differ")
		assert.NotEqual(t, "req_id", d.Field, "identity never differs")
	}

	status, _, page := get(t, srv, "/requests/req-1746792000001-000001/compare")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, 2, strings.Count(page, `<svg class="timeline"`), "both requests drawn")
	assert.Contains(t, page, `<tr class="missing">`)
	assert.Contains(t, page, "img.digest")

	// A request with no healthy one near it says so.
	status, _, body = get(t, srv, "/api/requests/req-1746792000005-000005/compare")
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"good":"","match":[],"differences":[]`)
	_, _, page = get(t, srv, "/requests/req-1746792000005-000005/compare")
	assert.Contains(t, page, "no healthy request near this one")
}
