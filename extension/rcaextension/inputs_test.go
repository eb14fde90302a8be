package rcaextension

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/eventgraph/storetest"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor"
)

// heatMap is a failure map as a reqsampling processor publishes it.
type heatMap reqsamplingprocessor.HeatMap

func (m heatMap) HeatMap() reqsamplingprocessor.HeatMap { return reqsamplingprocessor.HeatMap(m) }

func TestInputs(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	m := heatMap{
		Time: storetest.T0,
		Buckets: []reqsamplingprocessor.BucketHeat{
			{Prefix: "00", Requests: 100, Failures: 1, Kept: 3, RecentRequests: 50, RecentFailures: 0.5},
			{Prefix: "0a", Requests: 80, Failures: 60, Kept: 80, RecentRequests: 40, RecentFailures: 30, Hot: true},
			{Prefix: "none", Requests: 10, RecentRequests: 5},
		},
		HotInputs:     []reqsamplingprocessor.HotHash{{InputHash: "0a1b2c3d", RecentRequests: 20, RecentFailures: 18, FailureRate: 0.9}},
		TrackedHashes: 120,
	}
	with := func(running bool) *httptest.Server {
		srv := httptest.NewServer(newHandler(cfg, func() (eventgraph.Store, bool) { return nil, false },
			func() (reqsamplingprocessor.FailureMap, bool) { return m, running }, time.Now))
		t.Cleanup(srv.Close)
		return srv
	}
	srv := with(true)
	status, _, body := get(t, srv, "/api/inputs")
	require.Equal(t, http.StatusOK, status, body)
	var got inputsView
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Len(t, got.Buckets, 3)
	assert.Equal(t, bucketView{Prefix: "0a", Requests: 80, Failures: 60, Kept: 80, RecentFailureRate: 0.75, Hot: true}, got.Buckets[0], "hot first")
	assert.Equal(t, "00", got.Buckets[1].Prefix, "then by recent failure rate")
	assert.Equal(t, []hotHashView{{InputHash: "0a1b2c3d", RecentRequests: 20, RecentFailures: 18, FailureRate: 0.9}}, got.HotInputs)
	assert.Equal(t, 120, got.TrackedHashes)

	status, _, page := get(t, srv, "/inputs")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, page, "0a1b2c3d")
	assert.Contains(t, page, "75.0%")

	status, _, body = get(t, with(false), "/api/inputs")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, body, `no reqsampling processor \"reqsampling\" is running`)
}
