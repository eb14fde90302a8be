package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartRetriesWhenAPortIsTaken: a collector that exits because a port
// picked free was taken meanwhile is started again on other ports, up to
// startAttempts times; the error says why.
func TestStartRetriesWhenAPortIsTaken(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	bin := filepath.Join(dir, "collector")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho start >> "+starts+
		"\necho 'listen tcp 127.0.0.1:1: bind: address already in use'\nexit 1\n"), 0o700))
	cfg, err := loomConfig("../..")
	require.NoError(t, err)

	_, err = startCollector(bin, cfg)
	require.ErrorIs(t, err, errPortTaken)
	got, err := os.ReadFile(starts)
	require.NoError(t, err)
	assert.Equal(t, startAttempts, strings.Count(string(got), "start"))
}

func TestMoveListenersMovesEveryLoopbackListener(t *testing.T) {
	cfg, err := loomConfig("../..")
	require.NoError(t, err)
	moved, err := moveListeners(cfg)
	require.NoError(t, err)
	for _, path := range []string{
		"receivers.otlp.protocols.grpc.endpoint", "receivers.otlp.protocols.http.endpoint",
		"extensions.health_check.endpoint", "extensions.pprof.endpoint", "extensions.zpages.endpoint", "extensions.rca.endpoint",
		"exporters.prometheus.endpoint", // a listener, though an exporter
		"service.telemetry.metrics.readers[0].pull.exporter.prometheus.port",
	} {
		addr, ok := moved[path]
		require.True(t, ok, "%s not moved: %v", path, moved)
		assert.NotRegexp(t, `:(4317|4318|13133|1777|55679|8889|8888|4320)$`, addr, path)
	}
	seen := map[string]string{}
	for path, addr := range moved {
		require.NotContains(t, seen, addr, "%s and %s got the same port", path, seen[addr])
		seen[addr] = path
	}
	grpc, err := moved.endpoint("receivers.otlp.protocols.grpc.endpoint")
	require.NoError(t, err)
	assert.Equal(t, cfg["receivers"].(map[string]any)["otlp"].(map[string]any)["protocols"].(map[string]any)["grpc"].(map[string]any)["endpoint"], grpc)
	_, err = moved.endpoint("extensions.nothing.endpoint")
	assert.ErrorContains(t, err, "no loopback listener")
}

func TestStockAndFloorHaveWhatTheBenchmarkReads(t *testing.T) {
	for _, p := range pipelines {
		cfg, err := p.config("../..")
		require.NoError(t, err, p.name)
		moved, err := moveListeners(cfg)
		require.NoError(t, err, p.name)
		for _, suffix := range []string{"extensions.health_check.endpoint", "receivers.otlp.protocols.grpc.endpoint", "prometheus.port", "extensions.pprof.endpoint"} {
			_, err := moved.endpoint(suffix)
			assert.NoError(t, err, "%s: %s", p.name, suffix)
		}
	}
	stock, err := stockConfig("")
	require.NoError(t, err)
	statements := stock["processors"].(map[string]any)["transform"].(map[string]any)["log_statements"].([]any)[0].(map[string]any)["statements"].([]any)
	joined := ""
	for _, s := range statements {
		joined += s.(string) + "\n"
	}
	for _, want := range []string{"ParseJSON(body)", "ParseKeyValue(body)", "ExtractPatterns(body", `set(attributes["req_id"], attributes["request_id"])`,
		`set(attributes["resource_usage.latency_ms"], Double(attributes["duration_ms"]))`, `delete_key(attributes, "prompt")`} {
		assert.Contains(t, joined, want)
	}
}

func TestParseCPUTime(t *testing.T) {
	// The command may hold spaces and parentheses.
	stat := "4242 (otel col (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 12 0 100 2000000 5000 18446744073709551615"
	cpu, err := parseCPUTime(stat)
	require.NoError(t, err)
	assert.Equal(t, 3250*time.Millisecond, cpu, "utime 250 + stime 75 ticks of 10 ms")
	_, err = parseCPUTime("4242 (x) S 1")
	assert.Error(t, err)
}

func TestParseStatus(t *testing.T) {
	m, err := parseStatus(strings.NewReader("Name:\totelcol-loom\nVmPeak:\t 9999 kB\nVmHWM:\t  300000 kB\nVmRSS:\t  250000 kB\nRssAnon:\t  90000 kB\n"))
	require.NoError(t, err)
	assert.Equal(t, memory{rss: 250000 << 10, peak: 300000 << 10, anon: 90000 << 10}, m)
	_, err = parseStatus(strings.NewReader("Name:\tx\n"))
	assert.Error(t, err)
}

func TestParsePrometheusText(t *testing.T) {
	text := `# HELP otelcol_receiver_refused_spans_total Number of spans refused.
# TYPE otelcol_receiver_refused_spans_total counter
otelcol_receiver_refused_spans_total{receiver="otlp",transport="grpc",label="a}b"} 12
otelcol_receiver_refused_spans_total{receiver="otlp",transport="http"} 3
otelcol_receiver_refused_log_records_total{receiver="otlp"} 5
otelcol_process_memory_rss_bytes 1.2e+08
`
	m, err := parsePrometheusText(strings.NewReader(text))
	require.NoError(t, err)
	assert.InDelta(t, 15, m["otelcol_receiver_refused_spans_total"], 0)
	assert.InDelta(t, 20, sumPrefix(m, "otelcol_receiver_refused_"), 0)
	assert.InDelta(t, 1.2e8, sumPrefix(m, "otelcol_process_memory_rss"), 0)
}

func TestSlopeAfterWarmup(t *testing.T) {
	var samples []sample
	for i := range 20 {
		at := time.Duration(i) * 30 * time.Second
		rss := int64(200 * mib)
		if at >= 2*time.Minute {
			rss += int64(float64(at-2*time.Minute) / float64(time.Minute) * 3 * mib) // +3 MiB/min
		} else {
			rss = int64(i) * 50 * mib // a steep warm-up, left out
		}
		samples = append(samples, sample{at, rss})
	}
	slope, n, ok := slopeAfter(samples, 2*time.Minute)
	require.True(t, ok)
	assert.Equal(t, 16, n)
	assert.InDelta(t, 3, slope, 1e-9)
	_, _, ok = slopeAfter(samples[:5], 2*time.Minute)
	assert.False(t, ok, "one sample after the warm-up has no slope")
}

func TestComponentOf(t *testing.T) {
	for _, tc := range []struct {
		stack []string
		want  string
	}{
		{[]string{"runtime.mallocgc", "go.opentelemetry.io/collector/pdata/pcommon.Map.PutStr", "github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/extract.(*X).F", "main.main"},
			"github.com/loom-otel/loom/processor/goldenfieldprocessor"},
		{[]string{"github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor.(*p).ConsumeTraces"},
			"github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor"},
		{[]string{"modernc.org/sqlite/lib.Xsqlite3VdbeExec", "github.com/loom-otel/loom/exporter/eventgraphexporter.(*w).write"}, "modernc.org/sqlite/lib"},
		{[]string{"github.com/loom-otel/loom/internal/eventgraph.(*Store).Add"}, "github.com/loom-otel/loom/internal/eventgraph"},
		{[]string{"go.opentelemetry.io/collector/pdata/internal.Unmarshal[go.shape.struct { a/b.C }]", "google.golang.org/grpc.(*Server).handleStream"},
			"go.opentelemetry.io/collector/pdata/internal"},
	} {
		assert.Equal(t, tc.want, componentOf(tc.stack), "%v", tc.stack)
	}
}

func TestReportHasEveryRowAndCompleteSaysWhatIsMissing(t *testing.T) {
	opts := options{pipelines: pipelines, loads: []float64{5000, 0}, reps: 2, warmup: time.Second, window: 10 * time.Second}
	var results []result
	for rep := 1; rep <= 2; rep++ {
		for _, load := range opts.loads {
			for i, p := range pipelines {
				results = append(results, result{
					pipeline: p.name, load: load, rep: rep, window: 10 * time.Second,
					cpu: time.Duration(i+1) * time.Second, accepted: 50000, mem: memory{rss: 100 * mib, peak: int64(100*(i+1)) * mib},
				})
			}
		}
	}
	require.NoError(t, complete(opts, results))
	var out strings.Builder
	report(&out, opts, results)
	for _, want := range []string{
		"| loom | 5k/s | 1 | 0.200 |", "| floor | unthrottled | 2 | 0.600 |",
		"| 5k/s | CPU per 10k records | 0.50 | 0.33 | 0.67 |",
		"| unthrottled | throughput | 1.00 | 1.00 | 1.00 |",
		"The load generator runs in this process, on the same",
	} {
		assert.Contains(t, out.String(), want)
	}
	assert.NotContains(t, out.String(), "| 5k/s | throughput |", "throughput is compared at saturation only")

	err := complete(opts, results[1:])
	assert.ErrorContains(t, err, "loom at 5k/s rep 1")
}

// TestBreakdownTellsTheBinaryFromThePageCaches: the binary's mapped text
// is resident but not outside the Go runtime the way SQLite's caches are.
func TestBreakdownTellsTheBinaryFromThePageCaches(t *testing.T) {
	var out strings.Builder
	printBreakdown(&out, "At the end", &breakdown{rss: 600 * mib, anon: 450 * mib, goSys: 380 * mib})
	assert.Contains(t, out.String(), "RSS 600 MiB: 150 MiB mapped from files")
	assert.Contains(t, out.String(), "450 MiB anonymous, of which the Go runtime holds (Sys) 380 MiB and at least 70 MiB is outside it")
}

func TestParseLoads(t *testing.T) {
	loads, err := parseLoads("5000, 10000,0")
	require.NoError(t, err)
	assert.Equal(t, []float64{5000, 10000, 0}, loads)
	_, err = parseLoads("5k")
	assert.ErrorContains(t, err, `"5k" is not a rate`)
}
