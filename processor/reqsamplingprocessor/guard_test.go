package reqsamplingprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadatatest"
)

// A rule that matches a third of the traffic keeps at most the guard's share
// of it; failures are all kept, and what the guard took is counted.
func TestVolumeGuard(t *testing.T) {
	cacheMiss := PolicyConfig{Name: "cache_miss", Type: Stage, Stage: StageConfig{Patterns: []string{"cache/miss*"}}}
	cfg := onlyPolicies(defaultConfig().Policies[0], cacheMiss)
	cfg.VolumeGuard.MaxShare = 0.05
	h := newHarness(t, cfg)
	const n = 6000
	failing, healthyMisses := 0, 0
	h.send(requests(n, func(i int, r *rec) {
		if i%3 == 0 {
			r.stage = "cache/miss"
		}
		if i%50 == 0 {
			r.severity = plog.SeverityNumberError
			failing++
		} else if i%3 == 0 {
			healthyMisses++
		}
	}))
	h.wait(time.Minute)
	kept := map[string]int{}
	for _, spans := range h.out().spans {
		p, _ := spans[0].Get("sampling.policy")
		kept[p.Str()]++
	}
	assert.Equal(t, failing, kept["errors"], "every failure kept")
	share := float64(kept["cache_miss"]) / n
	assert.InDelta(t, 0.05, share, 0.01, "the rule keeps about max_share of the requests, not a third")
	metadatatest.AssertEqualProcessorReqsamplingThrottled(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: int64(healthyMisses - kept["cache_miss"]), Attributes: attribute.NewSet(attribute.String("policy", "cache_miss"))},
	}, metricdatatest.IgnoreTimestamp())
	require.Positive(t, healthyMisses-kept["cache_miss"])
}
