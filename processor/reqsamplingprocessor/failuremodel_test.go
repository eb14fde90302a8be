package reqsamplingprocessor

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/internal/workload/foundry"
)

// shippedConfig is the reqsampling block of the collector's default config,
// distribution/config.yaml: what a new user runs.
func shippedConfig(tb testing.TB) *Config {
	tb.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("..", "..", "distribution", "config.yaml"))
	require.NoError(tb, err)
	sub, err := cm.Sub("processors")
	require.NoError(tb, err)
	sub, err = sub.Sub("reqsampling")
	require.NoError(tb, err)
	cfg := defaultConfig()
	require.NoError(tb, sub.Unmarshal(cfg))
	require.NoError(tb, confmap.Validate(cfg))
	return cfg
}

// modelCase is one workload the shipped config is scored on.
type modelCase struct {
	family, scenario string
	source           func(tb testing.TB) workload.Source
}

const modelRequests = 6000

func modelCases() []modelCase {
	var out []modelCase
	fam := func(list string) func(testing.TB) workload.Source {
		return func(tb testing.TB) workload.Source {
			incidents, err := foundry.ParseIncidents(list)
			require.NoError(tb, err)
			g, err := foundry.NewGenerator(foundry.Config{Incidents: incidents, Affected: 0.12, Seed: 7,
				Pace: workload.Pace{Requests: modelRequests}})
			require.NoError(tb, err)
			return g
		}
	}
	for _, sc := range foundry.Incidents() {
		out = append(out, modelCase{"foundry", string(sc), fam(string(sc))})
	}
	out = append(out, modelCase{"foundry", "all", fam("all")}, modelCase{"foundry", "healthy", fam("healthy")})
	loom := func(scenarios ...workload.Scenario) func(testing.TB) workload.Source {
		return func(tb testing.TB) workload.Source {
			g, err := workload.NewGenerator(workload.Config{Scenarios: scenarios, Affected: 0.12, Requests: modelRequests, Seed: 7})
			require.NoError(tb, err)
			return g
		}
	}
	for _, sc := range []workload.Scenario{workload.S1, workload.S2, workload.S3} {
		out = append(out, modelCase{"loomgen", string(sc), loom(sc)})
	}
	out = append(out, modelCase{"loomgen", "s1+s2+s3", loom(workload.S1, workload.S2, workload.S3)})
	return out
}

// modelScore is the shipped config's result on one case.
type modelScore struct {
	scorecard
	loud, loudWhole, silent, silentWhole int
}

// runModelCase replays the case to the shipped config as one gateway and, side
// by side, as two gateways behind a req_id-routing load balancer, alone and
// sharing what they learn.
func runModelCase(tb testing.TB, c modelCase) (one, two, shared modelScore) {
	r := &replay{gen: c.source(tb), stitch: true, every: 10 * time.Millisecond, batchEvery: 200 * time.Millisecond}
	single := &variant{name: "shipped", cfg: shippedConfig(tb)}
	pair := &variant{name: "shipped, two gateways", cfg: shippedConfig(tb), gateways: 2}
	sharing := &variant{name: "shipped, two gateways sharing", cfg: shippedConfig(tb), gateways: 2, share: true}
	r.run(tb, modelRequests, []*variant{single, pair, sharing})
	return scoreModel(r.truths, single.kept), scoreModel(r.truths, pair.kept), scoreModel(r.truths, sharing.kept)
}

func scoreModel(truths []workload.Truth, kept *counter) modelScore {
	ms := modelScore{scorecard: score(truths, kept)}
	for _, tr := range truths {
		if !tr.Failed {
			continue
		}
		whole := kept.byReqID[tr.ReqID] == tr.Spans+tr.Logs+tr.TracedLogs
		if tr.Silent {
			ms.silent++
			ms.silentWhole += b2i(whole)
		} else {
			ms.loud++
			ms.loudWhole += b2i(whole)
		}
	}
	return ms
}

func pct(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(n)/float64(of))
}

func writeModelRow(w io.Writer, c modelCase, ms, two, shared modelScore) {
	fmt.Fprintf(w, "%-8s %-10s %8d %9s %9s %9s %9.2f%% %8.3f× %8d %11s %9.3f× %11s %9.3f×\n", c.family, c.scenario, ms.failing,
		pct(ms.loudWhole, ms.loud), pct(ms.silentWhole, ms.silent), pct(ms.failingComplete, ms.failing),
		ms.healthyRate(), ms.volume(), ms.partial, pct(two.failingComplete, two.failing), two.volume(),
		pct(shared.failingComplete, shared.failing), shared.volume())
}

func writeModelHeader(w io.Writer) {
	fmt.Fprintf(w, "\nfailure model: distribution/config.yaml's reqsampling after goldenfield and reqidstitch, %d requests per case\n", modelRequests)
	fmt.Fprintf(w, "%-8s %-10s %8s %9s %9s %9s %10s %9s %8s %11s %10s %11s %10s\n", "family", "scenario", "failing", "loud", "silent", "all",
		"healthy", "volume", "partial", "all (2 gw)", "vol (2 gw)", "all (2 sh)", "vol (2 sh)")
}

// TestShippedConfigOnBothFamilies scores the shipped default config on every
// incident of both workload families: failing requests kept whole, loud and
// silent apart, healthy kept share and volume ÷ the oracle's (every failing
// request whole and 1% of the healthy ones); and the same as two gateways,
// each learning only from the requests routed to it.
func TestShippedConfigOnBothFamilies(t *testing.T) {
	writeModelHeader(os.Stdout)
	for _, c := range modelCases() {
		one, two, shared := runModelCase(t, c)
		writeModelRow(os.Stdout, c, one, two, shared)
		// Two gateways alone learn each place from half its records: their
		// bounds are what this run measures with margin (83.21% and 1.146× at
		// worst), so that a regression shows. The goal holds on one gateway,
		// and on two that share what they learn.
		for _, s := range []struct {
			setup          string
			ms             modelScore
			kept, maxRatio float64
		}{{"one gateway", one, 99, 1.2}, {"two gateways", two, 80, 1.3}, {"two gateways sharing", shared, 99, 1.2}} {
			ms := s.ms
			assert.Zero(t, ms.partial, "%s/%s, %s: no request kept in part", c.family, c.scenario, s.setup)
			if ms.failing == 0 {
				assert.Less(t, ms.healthyRate(), 2.0, "%s/%s, %s: healthy traffic near the 1%% base rate", c.family, c.scenario, s.setup)
				continue
			}
			assert.GreaterOrEqual(t, ms.failingKept(), s.kept, "%s/%s, %s: failing requests kept whole", c.family, c.scenario, s.setup)
			assert.LessOrEqual(t, ms.volume(), s.maxRatio, "%s/%s, %s: volume ÷ oracle", c.family, c.scenario, s.setup)
		}
	}
}
