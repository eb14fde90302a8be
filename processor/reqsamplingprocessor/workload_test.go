package reqsamplingprocessor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/loom-otel/loom/internal/workload"
)

// scorecard is one variant's result against the ground truth.
type scorecard struct {
	requests, failing, failingComplete int
	// partial counts requests kept in part: never allowed.
	partial int
	// Volumes count request records (noise lines belong to no request).
	keptVolume, oracleVolume float64
	healthy, healthyKept     int
	// hotHealthy are healthy requests on an input that fails at least half
	// the time (per the ground truth): baselines for comparison.
	hotHealthy, hotHealthyKept int
	misses                     int
	lastMiss                   int // index of the last failing request not kept whole; -1 when none
}

func score(truths []workload.Truth, kept *counter) scorecard {
	type stats struct{ requests, failures int }
	byHash := map[string]*stats{}
	for _, tr := range truths {
		s := byHash[tr.InputHash]
		if s == nil {
			s = &stats{}
			byHash[tr.InputHash] = s
		}
		s.requests++
		if tr.Failed {
			s.failures++
		}
	}
	sc := scorecard{requests: len(truths), lastMiss: -1}
	for i, tr := range truths {
		records := tr.Spans + tr.Logs + tr.TracedLogs // traced logs get their req_id from reqidstitch
		got := kept.byReqID[tr.ReqID]
		if got != 0 && got != records {
			sc.partial++
		}
		sc.keptVolume += float64(got)
		if tr.Failed {
			sc.failing++
			sc.oracleVolume += float64(records)
			if got == records {
				sc.failingComplete++
			} else {
				sc.misses++
				sc.lastMiss = i
			}
			continue
		}
		sc.oracleVolume += 0.01 * float64(records)
		sc.healthy++
		if got > 0 {
			sc.healthyKept++
		}
		if s := byHash[tr.InputHash]; s.requests >= 3 && 2*s.failures >= s.requests {
			sc.hotHealthy++
			if got > 0 {
				sc.hotHealthyKept++
			}
		}
	}
	return sc
}

func (sc scorecard) failingKept() float64 {
	return 100 * float64(sc.failingComplete) / float64(sc.failing)
}
func (sc scorecard) volume() float64      { return sc.keptVolume / sc.oracleVolume }
func (sc scorecard) healthyRate() float64 { return 100 * float64(sc.healthyKept) / float64(sc.healthy) }
func (sc scorecard) hotHealthyRate() float64 {
	if sc.hotHealthy == 0 {
		return 0
	}
	return 100 * float64(sc.hotHealthyKept) / float64(sc.hotHealthy)
}

// On the generator's S1–S3 traffic, after the real goldenfield processor,
// every failing request of the ground truth is kept with all of its logs and
// spans, and healthy requests at about the base rate.
func TestWorkloadS1S2S3(t *testing.T) {
	r := newReplay(t, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12, Requests: 6000, Seed: 1,
	}, 10*time.Millisecond)
	// The README's gateway configuration: the defaults and a latency
	// threshold, which S2's slow input family needs (it is too large a share
	// of the traffic to stand out above the p99).
	v := &variant{name: "gateway", cfg: loadConfig(t, "gateway")}
	r.run(t, 6000, []*variant{v})
	sc := score(r.truths, v.kept)
	t.Logf("%d requests, %d failing: %.2f%% kept whole; healthy kept %.2f%%; volume %.2f× the oracle; decisions %v",
		sc.requests, sc.failing, sc.failingKept(), sc.healthyRate(), sc.volume(), v.decisions)
	assert.Equal(t, sc.failing, sc.failingComplete, "every failing request kept whole")
	assert.Zero(t, sc.partial, "no request kept in part")
	assert.InDelta(t, 1, sc.healthyRate(), 1, "healthy requests at about the 1% base rate")
	failedByScenario := map[workload.Scenario]int{}
	for _, tr := range r.truths {
		if tr.Failed {
			failedByScenario[tr.Scenario]++
		}
	}
	assert.Len(t, failedByScenario, 3, fmt.Sprint(failedByScenario))
}
