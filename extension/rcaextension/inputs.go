package rcaextension

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor"
)

// inputsView is reqsampling's input_hash failure map: the prefix buckets
// with their failure rates, and the inputs hot by their own.
type inputsView struct {
	Time          time.Time     `json:"time"`
	Buckets       []bucketView  `json:"buckets"`
	HotInputs     []hotHashView `json:"hot_inputs"`
	TrackedHashes int           `json:"tracked_hashes"`
}

type bucketView struct {
	Prefix   string `json:"prefix"`
	Requests int64  `json:"requests"`
	Failures int64  `json:"failures"`
	Kept     int64  `json:"kept"`
	// RecentFailureRate is the learner's decayed failures ÷ requests.
	RecentFailureRate float64 `json:"recent_failure_rate"`
	Hot               bool    `json:"hot"`
}

type hotHashView struct {
	InputHash      string  `json:"input_hash"`
	RecentRequests float64 `json:"recent_requests"`
	RecentFailures float64 `json:"recent_failures"`
	FailureRate    float64 `json:"failure_rate"`
}

// loadInputs reads the configured sampler's failure map; the buckets come
// hottest first, then by recent failure rate.
func (h *handler) loadInputs(*http.Request) (*inputsView, error) {
	m, ok := h.failureMap()
	if !ok {
		return nil, &httpError{http.StatusServiceUnavailable, fmt.Sprintf(
			"no reqsampling processor %q is running in this collector: add it to a pipeline, or set the rca extension's sampler to the one that is", h.cfg.Sampler)}
	}
	heat := m.HeatMap()
	v := &inputsView{Time: heat.Time, Buckets: []bucketView{}, HotInputs: []hotHashView{}, TrackedHashes: heat.TrackedHashes}
	for _, b := range heat.Buckets {
		rate := 0.0
		if b.RecentRequests > 0 {
			rate = b.RecentFailures / b.RecentRequests
		}
		v.Buckets = append(v.Buckets, bucketView{Prefix: b.Prefix, Requests: b.Requests, Failures: b.Failures, Kept: b.Kept,
			RecentFailureRate: rate, Hot: b.Hot})
	}
	slices.SortStableFunc(v.Buckets, func(a, b bucketView) int {
		switch {
		case a.Hot != b.Hot:
			if a.Hot {
				return -1
			}
			return 1
		case a.RecentFailureRate > b.RecentFailureRate:
			return -1
		case a.RecentFailureRate < b.RecentFailureRate:
			return 1
		}
		return 0
	})
	for _, hot := range heat.HotInputs {
		v.HotInputs = append(v.HotInputs, hotHashView{InputHash: hot.InputHash, RecentRequests: hot.RecentRequests,
			RecentFailures: hot.RecentFailures, FailureRate: hot.FailureRate})
	}
	return v, nil
}

// lookupFailureMap finds the configured reqsampling processor's failure map.
func lookupFailureMap(cfg *Config) func() (reqsamplingprocessor.FailureMap, bool) {
	return func() (reqsamplingprocessor.FailureMap, bool) {
		return reqsamplingprocessor.LookupFailureMap(cfg.Sampler)
	}
}
