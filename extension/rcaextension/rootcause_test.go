package rcaextension

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/sqlitestore"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
)

// incident describes a synthetic window, named unlike Loom's own workloads:
// requests pass an edge, a retrieval step and a generator; the generator
// runs one of several adapters in one of several regions. Requests under
// every term of cause fail (failRate), the others rarely; healthy requests
// are kept at 1 in keepOneIn.
type incident struct {
	cause     map[string]string
	failRate  float64
	requests  int
	keepOneIn int
	seed      uint64
}

// events generates the window's events as the store returns them. A failing
// request's generator event reports the failure and carries verdict=refused,
// a symptom; the request's failure reasons name outcome.code; a failing
// request whose cause is the adapter never got a model version.
func (inc incident) events() (events []eventgraph.DimensionEvent, failing int) {
	rng := rand.New(rand.NewPCG(inc.seed, 7))
	regions := []string{"north", "south", "east", "west"}
	adapters := []string{"sql-v1", "sql-v2", "chat-v4", "code-v1"}
	for n := range inc.requests {
		values := map[string]string{"region": regions[rng.IntN(len(regions))], "adapter": adapters[rng.IntN(len(adapters))]}
		under := true
		for k, v := range inc.cause {
			under = under && values[k] == v
		}
		failed := rng.Float64() < 0.005 || (under && rng.Float64() < inc.failRate)
		weight := 1.0
		if !failed {
			if rng.IntN(inc.keepOneIn) != 0 {
				continue
			}
			weight = float64(inc.keepOneIn)
		} else {
			failing++
		}
		id := fmt.Sprintf("job-%05d", n)
		model := "gen-7b-r" + fmt.Sprint(1+rng.IntN(2))
		if failed && under {
			model = ""
		}
		common := []string{"region=" + values["region"], "tier=standard"}
		steps := []struct {
			service string
			dims    []string
		}{
			{"edge", []string{"route=/v2/generate"}},
			{"retriever", []string{"index=docs-" + fmt.Sprint(rng.IntN(3))}},
			// pool is one to one with the adapter: the counts cannot tell them apart.
			{"generator", []string{"adapter=" + values["adapter"], "pool=p-" + values["adapter"]}},
			// The edge logs a summary at the end: of every failing request,
			// of a healthy one now and then.
			{"edge", nil},
		}
		if failed || rng.IntN(3) == 0 {
			steps[3].dims = []string{"summary.logged=yes"}
		}
		for k, st := range steps {
			e := eventgraph.DimensionEvent{ReqID: id, Time: benchT0.Add(time.Duration(n)*time.Second + time.Duration(k)*time.Millisecond),
				RequestFailed: failed, AdjustedCount: weight, Service: st.service,
				Host: fmt.Sprintf("%s-%d", st.service, rng.IntN(3)), InputHash: fmt.Sprintf("%08x", rng.Uint32()),
				ModelVer: model, Dims: append(append([]string{}, common...), st.dims...)}
			if failed && k == 2 {
				e.EventFailed, e.ReportsError = true, true
				e.Failure = &eventgraph.EventFailure{Symptoms: []string{"outcome.code"}, CausedBy: []string{"retrieval_feeds_decode"},
					Reasons: []string{fmt.Sprintf("value_drift: outcome.code=refused at generate/decode (generator): 0.1%% of the baseline, %d.0%% now", 1+n%9)}}
				e.Dims = append(e.Dims, "verdict=refused", "outcome.code=refused")
			} else if k == 2 {
				e.Dims = append(e.Dims, "verdict=ok", "outcome.code=ok")
			}
			events = append(events, e)
		}
	}
	return events, failing
}

func defaultRootCause() *RootCauseConfig { return &createDefaultConfig().(*Config).RootCause }

func TestRankNamesTheCauseNotTheSymptoms(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause map[string]string
	}{
		{"one attribute", map[string]string{"adapter": "code-v1"}},
		{"two together", map[string]string{"adapter": "sql-v2", "region": "east"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events, failing := incident{cause: tc.cause, failRate: 0.9, requests: 40_000, keepOneIn: 20, seed: 5}.events()
			v, err := rankRootCauses(events, defaultRootCause())
			require.NoError(t, err)
			require.NotEmpty(t, v.Candidates)
			top := v.Candidates[0]
			pooled := maps.Clone(tc.cause)
			pooled["pool"] = "p-" + pooled["adapter"]
			delete(pooled, "adapter")
			assert.ElementsMatch(t, []map[string]string{tc.cause, pooled}, append([]map[string]string{top.Dimensions}, top.Equivalent...),
				"the cause first, the pool that always goes with its adapter equivalent: %+v", v.Candidates)
			assert.Equal(t, failing, v.Failing)
			assert.InDelta(t, 40_000, v.Total, 4000, "healthy requests weighed by their adjusted count")
			assert.Greater(t, top.Failing, failing*3/4, "most failing requests are inside")
			assert.Less(t, top.Total, v.Total/3)
			assert.Equal(t, failing-top.Failing, top.Outside.Failing)
			assert.NotEmpty(t, top.Examples)
			assert.Equal(t, fmt.Sprintf("value_drift: outcome.code=refused at generate/decode (generator) (%d of its failing requests)", top.Failing),
				top.Evidence[1], "the failure reasons of the requests inside, without their quantities")
			assert.Equal(t, fmt.Sprintf("CAUSED by rule retrieval_feeds_decode into the events that show the failure (%d of its failing requests)",
				top.Failing), top.Evidence[2], "the causal edges behind it")
			assert.Contains(t, v.Symptoms, "outcome.code", "named by the failure reasons")
			for _, c := range v.Candidates {
				assert.NotContains(t, c.Dimensions, "summary.logged", "written once the request had failed")
			}
			assert.Contains(t, v.Symptoms, "verdict", "its value refused is carried only by the events that show the failure")
			for _, c := range v.Candidates {
				assert.NotContains(t, c.Dimensions, "verdict")
				assert.NotContains(t, c.Dimensions, "outcome.code")
				if model, ok := c.Dimensions[golden.ModelVer]; ok {
					assert.NotEmpty(t, model, "an absent model version is a symptom too")
				}
			}
		})
	}
}

// A small window (a few dozen requests, as a service's first minutes give)
// whose events carry identifiers, one value per request, and whose failing
// requests name the model asked for (its family) until the error names the
// version: the failing version is still named.
func TestRankASmallWindowWithIdentifiers(t *testing.T) {
	var events []eventgraph.DimensionEvent
	for n := range 36 {
		failed := n%9 < 2
		version := fmt.Sprintf("chat-13b-r%d", 1+n%2)
		if failed {
			version = "chat-13b-r9"
		}
		for k, stage := range []string{"api/accept", "llm/complete", "api/respond"} {
			model := version
			if failed && k != 1 {
				model = golden.ModelFamily(version)
			}
			e := eventgraph.DimensionEvent{ReqID: fmt.Sprintf("call-%03d", n), Time: benchT0.Add(time.Duration(n)*time.Second + time.Duration(k)*time.Millisecond),
				RequestFailed: failed, AdjustedCount: 1, Service: "assistant", Host: "node-a", ModelVer: model,
				Dims: []string{"stage.name=" + stage}}
			for _, id := range []string{"completion.id", "client.port", "trace.sampled_at", "usage.prompt", "usage.completion", "fingerprint"} {
				e.Dims = append(e.Dims, fmt.Sprintf("%s=%s-%03d", id, id, n))
			}
			if failed && k == 1 {
				e.EventFailed, e.ReportsError = true, true
			}
			events = append(events, e)
		}
	}
	v, err := rankRootCauses(events, defaultRootCause())
	require.NoError(t, err)
	require.NotEmpty(t, v.Candidates, "8 failing requests of 36, all on one version")
	assert.Equal(t, map[string]string{golden.ModelVer: "chat-13b-r9"}, v.Candidates[0].Dimensions)
}

// A window whose healthy requests sampling kept one in fifty, a handful
// each standing for fifty, says its baseline is thin; the same requests all
// kept do not.
func TestRankSaysWhenItsBaselineIsThin(t *testing.T) {
	for _, keepOneIn := range []int{50, 1} {
		events, failing := incident{cause: map[string]string{"adapter": "code-v1"}, failRate: 0.9, requests: 200, keepOneIn: keepOneIn, seed: 5}.events()
		v, err := rankRootCauses(events, defaultRootCause())
		require.NoError(t, err)
		require.Equal(t, failing, v.Failing)
		assert.Equal(t, keepOneIn > 1, v.ThinBaseline(), "%d healthy kept of about %d", v.Healthy, v.Total-v.Failing)
		var page bytes.Buffer
		require.NoError(t, pages.ExecuteTemplate(&page, "rootcause.html", v))
		assert.Equal(t, keepOneIn > 1, strings.Contains(page.String(), `id="thin-baseline"`))
		assert.Contains(t, page.String(), fmt.Sprintf("the %d healthy ones kept", v.Healthy))
	}
}

// Calls that failed before an answer named the model's version carry only
// the model asked for, its family: that is how they failed, not why.
func TestRankLeavesAFamilyOutOfTheCauses(t *testing.T) {
	var events []eventgraph.DimensionEvent
	for n := range 90 {
		failed := n%3 == 0
		adapter := fmt.Sprintf("adapter=lora-%d", 1+n%2)
		if failed {
			adapter = "adapter=lora-cold"
		}
		answered := "mistral-7b-v0.3"
		if failed {
			answered = "mistral-7b" // no answer, no version
		}
		for k, model := range []string{"mistral-7b", answered} {
			events = append(events, eventgraph.DimensionEvent{ReqID: fmt.Sprintf("call-%03d", n),
				Time: benchT0.Add(time.Duration(n)*time.Second + time.Duration(k)*time.Millisecond), RequestFailed: failed, AdjustedCount: 1,
				Service: "router", Host: "node-a", ModelVer: model, Dims: []string{adapter}, EventFailed: failed && k == 1, ReportsError: failed && k == 1})
		}
	}
	v, err := rankRootCauses(events, defaultRootCause())
	require.NoError(t, err)
	require.NotEmpty(t, v.Candidates)
	assert.Equal(t, map[string]string{"adapter": "lora-cold"}, v.Candidates[0].Dimensions)
	for _, c := range v.Candidates {
		assert.NotEqual(t, "mistral-7b", c.Dimensions[golden.ModelVer], "%+v", v.Candidates)
	}
}

func TestRankWithoutFailuresOrDimensions(t *testing.T) {
	v, err := rankRootCauses(nil, defaultRootCause())
	require.NoError(t, err)
	assert.Empty(t, v.Candidates)
	assert.Zero(t, v.Total)

	events, _ := incident{cause: map[string]string{"adapter": "code-v1"}, failRate: 0, requests: 2000, keepOneIn: 1, seed: 1}.events()
	v, err = rankRootCauses(events, defaultRootCause())
	require.NoError(t, err)
	assert.Empty(t, v.Candidates, "failures spread evenly have no cause to name: %+v", v.Candidates)
}

func TestRankHonoursIncludeAndExclude(t *testing.T) {
	events, _ := incident{cause: map[string]string{"adapter": "code-v1"}, failRate: 0.9, requests: 10_000, keepOneIn: 5, seed: 2}.events()
	cfg := *defaultRootCause()
	cfg.Exclude = []string{"adapter"}
	v, err := rankRootCauses(events, &cfg)
	require.NoError(t, err)
	assert.NotContains(t, v.Dimensions, "adapter")
	cfg = *defaultRootCause()
	cfg.Include = []string{"region", "tier"}
	v, err = rankRootCauses(events, &cfg)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"region"}, v.Dimensions, "tier has one value: it splits nothing")
}

// TestAPIRootCause reads the ranking over HTTP from a real embedded store.
func TestAPIRootCause(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "graph.db"), sqlitestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close(ctx) })
	dims, _ := incident{cause: map[string]string{"adapter": "code-v1"}, failRate: 0.9, requests: 3000, keepOneIn: 5, seed: 3}.events()
	var events []eventgraph.Event
	for i, d := range dims {
		e := eventgraph.Event{ID: fmt.Sprintf("%032x", i+1), Kind: eventgraph.KindLog, Time: d.Time,
			ReqID: d.ReqID, Service: d.Service, Host: d.Host, ModelVer: d.ModelVer, InputHash: d.InputHash,
			Failed: d.EventFailed, Dims: d.Dims, AdjustedCount: d.AdjustedCount}
		if d.Failure != nil {
			e.Attrs = map[string]any{failure.ReasonsAttr: d.Failure.Reasons, eventgraph.SymptomsAttr: d.Failure.Symptoms}
		}
		if d.ReportsError {
			e.SeverityNumber = 17
		}
		events = append(events, e)
	}
	require.NoError(t, store.Write(ctx, events))
	srv := serve(t, store)
	window := fmt.Sprintf("from=%d&to=%d", benchT0.UnixMilli(), benchT0.Add(time.Hour).UnixMilli())
	status, _, body := get(t, srv, "/api/rootcause?"+window)
	require.Equal(t, http.StatusOK, status, body)
	var v rootCauseView
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	require.NotEmpty(t, v.Candidates)
	assert.Equal(t, map[string]string{"adapter": "code-v1"}, v.Candidates[0].Dimensions)
	assert.Positive(t, v.Candidates[0].Score)
	assert.Equal(t, benchT0, v.Window.From.UTC())

	status, _, body = get(t, srv, "/rootcause?"+window)
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `adapter=code-v1`)
	assert.Greater(t, v.Healthy, thinBaseline)
	assert.NotContains(t, body, `id="thin-baseline"`)
	status, _, body = get(t, srv, "/?"+window)
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `id="ranking-pending"`, "the overview ranks the window in the background")
	srv.Config.Handler.(*handler).rankings.wg.Wait()
	_, _, body = get(t, srv, "/?"+window)
	assert.Contains(t, body, `adapter=code-v1`, "then shows the top causes")
	assert.Contains(t, body, fmt.Sprintf("failing of about <strong>%d</strong> requests", v.Total))
	assert.Contains(t, body, `href="/requests/`+v.Candidates[0].Examples[0]+`/compare"`)

	for _, bad := range []string{"from=yesterday", "from=1&to=0", fmt.Sprintf("from=0&to=%d", benchT0.UnixMilli())} {
		status, _, body = get(t, srv, "/api/rootcause?"+bad)
		assert.Equal(t, http.StatusBadRequest, status, bad)
		assert.Contains(t, body, `"error"`)
	}
}
