package goldenfieldprocessor

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/transformprocessor"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/internal/golden"
)

const benchBatch = 1000 // records per ConsumeLogs call, as after a batch processor

// benchLogs builds a batch of records from four services, each made by fill.
func benchLogs(fill func(i int, lr plog.LogRecord)) plog.Logs {
	ld := plog.NewLogs()
	for s, service := range []string{"gateway", "preproc", "model", "postproc"} {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", service)
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for i := range benchBatch / 4 {
			fill(s*benchBatch/4+i, lrs.AppendEmpty())
		}
	}
	return ld
}

// attributeRecord carries its fields as attributes, under aliases.
func attributeRecord(i int, lr plog.LogRecord) {
	a := lr.Attributes()
	a.PutStr("request_id", fmt.Sprintf("req-%013d-a1b2c3", 1715234890123+i))
	a.PutStr("stage", "Model.Forward")
	a.PutStr("model_name", "llama3-8b-v2.1.4")
	a.PutStr("duration_ms", "2340")
	a.PutInt("gpu_mem_mb", 12450)
	a.PutStr("prompt", "Write a haiku about GPUs, please")
	a.PutStr("level", "info")
	a.PutStr("http.route", "/v1/chat/completions")
}

// jsonRecord carries its fields in a JSON body.
func jsonRecord(i int, lr plog.LogRecord) {
	lr.Body().SetStr(fmt.Sprintf(`{"level":"info","msg":"forward done","request_id":"req-%013d-a1b2c3","stage":"model/forward",`+
		`"model_name":"llama3-8b-v2.1.4","duration_ms":2340,"gpu_mem_mb":12450,"input_hash":"a1b2c3d4","usage":{"prompt_tokens":523,"completion_tokens":87}}`,
		1715234890123+i))
}

// textRecord carries its fields in a plain-text body, as print-style logs do.
func textRecord(i int, lr plog.LogRecord) {
	lr.Body().SetStr(fmt.Sprintf("2026-12-03 10:00:00,123 INFO worker.py:88 [req-%013d-a1b2c3] model forward completed "+
		"stage=model/forward model_ver: llama3-8b-v2.1.4 latency_ms=2340 tokens=523, queue depth 3 (p50 12ms)", 1715234890123+i))
}

func newBenchProcessor(b testing.TB, cfg *Config) consumer.Logs {
	p, err := NewFactory().CreateLogs(context.Background(), settings(nil), cfg, consumertest.NewNop())
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, p.Shutdown(context.Background())) })
	return p
}

// newAliasTransform builds a contrib transform processor doing the default alias
// normalization with OTTL: copy each alias to its canonical name (as a number
// for numeric fields) unless that is set, then delete the alias.
func newAliasTransform(b testing.TB) consumer.Logs {
	aliases := golden.DefaultAliases()
	var statements []any
	for _, alias := range slices.Sorted(maps.Keys(aliases)) {
		canonical := aliases[alias]
		value := fmt.Sprintf(`attributes[%q]`, alias)
		if golden.IsResourceUsage(canonical) || canonical == golden.InputTokens || canonical == golden.OutputTokens {
			value = fmt.Sprintf(`Int(%s)`, value)
		}
		statements = append(statements, fmt.Sprintf(`set(attributes[%q], %s) where attributes[%q] != nil and attributes[%q] == nil`, canonical, value, alias, canonical))
		if !golden.KeepsSource(alias) {
			statements = append(statements, fmt.Sprintf(`delete_key(attributes, %q)`, alias))
		}
	}
	f := transformprocessor.NewFactory()
	cfg := f.CreateDefaultConfig()
	require.NoError(b, confmap.NewFromStringMap(map[string]any{
		"log_statements": []any{map[string]any{"context": "log", "statements": statements}},
	}).Unmarshal(cfg))
	p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(f.Type()), cfg, consumertest.NewNop())
	require.NoError(b, err)
	require.NoError(b, p.Start(context.Background(), nil))
	b.Cleanup(func() { require.NoError(b, p.Shutdown(context.Background())) })
	return p
}

// benchConsume runs consume on a fresh copy of batch per iteration and reports
// records/s, allocs/record and B/record; copying the batch is not measured.
func benchConsume(b *testing.B, batch plog.Logs, consume consumer.Logs) {
	var took time.Duration
	var mallocs, bytes uint64
	var ms runtime.MemStats
	for b.Loop() {
		b.StopTimer()
		ld := plog.NewLogs()
		batch.CopyTo(ld)
		runtime.ReadMemStats(&ms)
		mallocs0, bytes0 := ms.Mallocs, ms.TotalAlloc
		b.StartTimer()
		start := time.Now()
		require.NoError(b, consume.ConsumeLogs(context.Background(), ld))
		took += time.Since(start)
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		mallocs, bytes = mallocs+ms.Mallocs-mallocs0, bytes+ms.TotalAlloc-bytes0
		b.StartTimer()
	}
	records := float64(b.N * benchBatch)
	b.ReportMetric(records/took.Seconds(), "records/s")
	b.ReportMetric(float64(mallocs)/records, "allocs/record")
	b.ReportMetric(float64(bytes)/records, "B/record")
}

// Loom's processor (default config: everything on) against a contrib transform
// processor doing only the alias normalization, on the same attribute-only
// records. cmd/benchratio prints goldenfield's speed relative to the baseline.
func BenchmarkConsumeLogs(b *testing.B) {
	batch := benchLogs(attributeRecord)
	b.Run("baseline-transform", func(b *testing.B) { benchConsume(b, batch, newAliasTransform(b)) })
	b.Run("goldenfield", func(b *testing.B) { benchConsume(b, batch, newBenchProcessor(b, defaultConfig())) })
}

// Records whose fields are in a JSON body to parse; default config.
func BenchmarkJSONBody(b *testing.B) {
	benchConsume(b, benchLogs(jsonRecord), newBenchProcessor(b, defaultConfig()))
}

// Records whose fields are in a plain-text body; default config.
func BenchmarkTextBody(b *testing.B) {
	benchConsume(b, benchLogs(textRecord), newBenchProcessor(b, defaultConfig()))
}

// The transform configuration compared above does the same renames as goldenfield.
func TestAliasTransformMatchesGoldenfield(t *testing.T) {
	run := func(p consumer.Logs) []plog.LogRecord {
		ld := benchLogs(attributeRecord)
		require.NoError(t, p.ConsumeLogs(context.Background(), ld))
		return logRecords([]plog.Logs{ld})
	}
	loom, transform := run(newBenchProcessor(t, defaultConfig())), run(newAliasTransform(t))
	require.Len(t, loom, benchBatch)
	require.Len(t, transform, benchBatch)
	aliases := golden.DefaultAliases()
	for i := range loom {
		l, tr := loom[i].Attributes().AsRaw(), transform[i].Attributes().AsRaw()
		for alias, canonical := range aliases {
			require.Equal(t, l[canonical], tr[canonical], canonical)
			require.Equal(t, l[alias], tr[alias], alias)
		}
		require.Equal(t, int64(2340), tr[golden.LatencyMs])
	}
}
