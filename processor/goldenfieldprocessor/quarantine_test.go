package goldenfieldprocessor

import (
	"context"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/filterprocessor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/internal/golden"
)

// The quarantine pattern of the README: two pipelines from the same receiver,
// each with its own goldenfield instance, split by filter processors on
// golden.valid. Valid records and schema.drift records reach the main
// pipeline; failing records reach only the quarantine pipeline.
func TestQuarantinePattern(t *testing.T) {
	filter := func(condition string, next consumer.Logs) consumer.Logs {
		f := filterprocessor.NewFactory()
		cfg := f.CreateDefaultConfig()
		require.NoError(t, confmap.NewFromStringMap(map[string]any{
			"error_mode": "ignore",
			"logs":       map[string]any{"log_record": []any{condition}},
		}).Unmarshal(cfg))
		p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(f.Type()), cfg, next)
		require.NoError(t, err)
		require.NoError(t, p.Start(context.Background(), nil))
		t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
		return p
	}
	pipeline := func(name string, cfg *Config, condition string) (consumer.Logs, *consumertest.LogsSink) {
		sink := new(consumertest.LogsSink)
		set := settings(nil)
		set.ID = component.MustNewIDWithName("goldenfield", name)
		p, err := NewFactory().CreateLogs(context.Background(), set, cfg, filter(condition, sink))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
		return p, sink
	}
	mainCfg := strictConfig()
	mainCfg.Drift.MinRecords = 2
	quarantineCfg := strictConfig()
	quarantineCfg.Drift.Enabled = false
	main, mainSink := pipeline("", mainCfg, `attributes["golden.valid"] == false`)
	quarantine, quarantineSink := pipeline("quarantine", quarantineCfg, `attributes["golden.valid"] != false`)

	forward := func(version string, hash bool) rec {
		attrs := with(goldenAttrs(), golden.ModelVer, version)
		if hash {
			attrs["raw_output_hash"] = "h"
		}
		return rec{service: "model", attrs: attrs}
	}
	input := makeLogs(t,
		forward("llama3-8b-v1", true), forward("llama3-8b-v1", true), rec{service: "gateway", body: "received request"},
		forward("llama3-8b-v2", false), forward("llama3-8b-v2", false),
	)
	for _, p := range []consumer.Logs{main, quarantine} { // a receiver fans out copies
		ld := plog.NewLogs()
		input.CopyTo(ld)
		require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	}

	var mainEvents []string
	for _, lr := range logRecords(mainSink.AllLogs()) {
		if lr.EventName() == golden.SchemaDriftEvent {
			mainEvents = append(mainEvents, golden.SchemaDriftEvent)
			continue
		}
		assert.Equal(t, true, lr.Attributes().AsRaw()[golden.ValidAttr])
		mainEvents = append(mainEvents, "valid")
	}
	assert.Equal(t, []string{"valid", "valid", "valid", "valid", golden.SchemaDriftEvent}, mainEvents)
	quarantined := logRecords(quarantineSink.AllLogs())
	require.Len(t, quarantined, 1)
	assert.Equal(t, "received request", quarantined[0].Body().Str())
}
