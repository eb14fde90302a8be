package fuzz

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/workload"
)

func requests(t *testing.T, cfg Config) (*Generator, []*workload.Request) {
	t.Helper()
	g, err := New(cfg)
	require.NoError(t, err)
	end := time.Unix(1_800_000_000, 0)
	var out []*workload.Request
	for range cfg.Requests {
		end = end.Add(10 * time.Millisecond)
		out = append(out, g.Next(end))
	}
	return g, out
}

func TestSameSeedSameWorkload(t *testing.T) {
	_, a := requests(t, Config{Seed: 3, Requests: 200})
	_, b := requests(t, Config{Seed: 3, Requests: 200})
	require.Equal(t, a, b)
	_, c := requests(t, Config{Seed: 4, Requests: 200})
	assert.NotEqual(t, a[0].Spans[0].Service.Name, c[0].Spans[0].Service.Name)
}

// Every class of incident fails some requests, after its start and through
// its faulty instance only, and the truth counts every record.
func TestEveryIncidentHasGroundTruth(t *testing.T) {
	for _, sc := range Incidents() {
		for seed := range uint64(8) {
			g, reqs := requests(t, Config{Seed: seed, Requests: 1200, Incident: sc})
			failing := 0
			for i, r := range reqs {
				tr := r.Truth
				assert.Equal(t, len(r.Spans), tr.Spans, "%s/%d", sc, seed)
				assert.Equal(t, len(r.Logs), tr.Logs+tr.TracedLogs, "%s/%d", sc, seed)
				for _, s := range r.Spans {
					assert.False(t, s.Start.Before(tr.Start) || s.End.After(tr.End), "%s/%d: spans within the request", sc, seed)
				}
				for _, l := range r.Logs {
					assert.True(t, l.Context.IsValid(), "every line carries its trace context")
					assert.False(t, l.Time.Before(tr.Start) || l.Time.After(tr.End), "%s/%d: lines within the request", sc, seed)
				}
				if !tr.Failed {
					continue
				}
				failing++
				assert.GreaterOrEqual(t, i, g.startAt)
				assert.Equal(t, g.Incident(), tr.Scenario)
				assert.Equal(t, Silent(g.Incident()), tr.Silent)
				require.NotNil(t, tr.RootCause)
			}
			assert.Positive(t, failing, "%s/%d: requests fail", sc, seed)
			assert.Less(t, failing, len(reqs)/2, "%s/%d: a minority fails", sc, seed)
		}
	}
}

func TestRandomTopologies(t *testing.T) {
	sizes := map[int]bool{}
	for seed := range uint64(40) {
		g, reqs := requests(t, Config{Seed: seed, Requests: 50})
		sizes[len(g.services)] = true
		assert.GreaterOrEqual(t, len(g.services), 3)
		assert.LessOrEqual(t, len(g.services), 15)
		assert.Equal(t, g.TraceOnly(), g.services[0].reqIDKey == "", "the entry service names its request, unless none does")
		assert.Positive(t, g.Services())
		for _, r := range reqs {
			assert.NotEmpty(t, r.Truth.ReqID)
			assert.NotEmpty(t, r.Truth.TraceIDs)
		}
	}
	assert.Greater(t, len(sizes), 5)
}

// A third of the workloads are of services that write no request id: a
// request is its entry trace, and detached work links to its caller.
func TestTraceOnlyWorkloads(t *testing.T) {
	traceOnly, links := 0, 0
	for seed := range uint64(30) {
		g, reqs := requests(t, Config{Seed: seed, Requests: 100})
		if !g.TraceOnly() {
			continue
		}
		traceOnly++
		for _, r := range reqs {
			assert.Equal(t, r.Truth.TraceIDs[0], r.Truth.ReqID, "the entry trace keys the request")
			assert.Len(t, r.Truth.ReqID, 32)
			assert.Zero(t, r.Truth.Logs, "no line names the request")
			for _, s := range r.Spans {
				for _, kv := range s.Attrs {
					assert.NotContains(t, reqIDSpellings, string(kv.Key))
				}
				for _, l := range s.Links {
					links++
					assert.NotEqual(t, s.Context.TraceID(), l.TraceID(), "a link leaves the trace")
				}
			}
		}
	}
	assert.Greater(t, traceOnly, 5)
	assert.Less(t, traceOnly, 20)
	assert.Positive(t, links, "detached work links to the span that started it")
}
