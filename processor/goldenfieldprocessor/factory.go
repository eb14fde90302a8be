//go:generate ../../.tools/mdatagen metadata.yaml

// Package goldenfieldprocessor makes logs and spans carry the golden fields
// (ARCHITECTURE.md §2): it extracts them from bodies, normalizes aliases and
// types, computes input_hash and redacts raw input, validates the contract,
// tags or drops failing records and detects schema drift between model versions.
package goldenfieldprocessor // import "github.com/loom-otel/loom/processor/goldenfieldprocessor"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/sharedcomponent"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadata"
)

var mutatesData = processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true})

// NewFactory returns the goldenfield processor factory.
func NewFactory() processor.Factory {
	f := &factory{}
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithLogs(f.createLogs, metadata.LogsStability),
		processor.WithTraces(f.createTraces, metadata.TracesStability),
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		Extract: ExtractConfig{
			Enabled:      true,
			MaxBodyBytes: 64 << 10,
			MaxDepth:     6,
			MaxFields:    64,
			TextKeys: []string{
				golden.ReqID, "request_id", golden.Stage, golden.ModelVer, "model", "model_name", golden.InputHash,
				"latency_ms", "duration_ms", "gpu_mem_mb", "cpu_percent", "tokens",
			},
			// req-… and req_… ids in free text; "req_id" itself is not an id.
			Patterns: []string{`\b(?P<req_id>req[-_][a-z_-]*[0-9][0-9A-Za-z_-]*)`},
		},
		// Token counts are resource_usage.* facts, numeric like every one.
		Normalize: NormalizeConfig{MaxValueBytes: 4096},
		InputHash: InputHashConfig{
			SourceFields:  []string{"prompt", "gen_ai.prompt", "input", "messages", "gen_ai.input.messages", "llm.input_messages"},
			Normalization: golden.NormalizeWhitespace,
		},
		Redaction: RedactionConfig{
			Enabled: true,
			Mode:    RedactionRemove,
			Attributes: []string{
				"api_key", "apikey", "authorization", "http.request.header.authorization", "password",
				"secret", "access_token", "email", "user.email", "phone",
			},
			BodyPatterns: []string{patternEmail, patternPhone, patternAPIKey},
		},
		Validation: ValidationConfig{Profile: ProfileGolden, PerService: true},
		Action:     ActionConfig{Mode: ActionTag},
		Drift: DriftConfig{
			Enabled:     true,
			MaxSeries:   1000,
			MaxFields:   128,
			MinRecords:  10,
			PresentRate: 0.95,
			AbsentRate:  0.05,
		},
		MaxServices: 256,
	}
}

// factory shares, per component ID, between the logs and traces instances
// of a processor: one drift tracker, so drift seen in spans is reported
// through the logs pipeline, and what each service's records have carried
// (validation::per_service), so a service's spans and lines are judged by
// what either has carried.
type factory struct {
	trackers sharedcomponent.Registry[*driftTracker]
	carried  sharedcomponent.Registry[*carriedFields]
}

// acquire returns the tracker for id, creating it on first use; release undoes one acquire.
func (f *factory) acquire(id component.ID, cfg DriftConfig) (tracker *driftTracker, release func()) {
	tracker, _ = f.trackers.Acquire(id, func() (*driftTracker, error) { return newDriftTracker(cfg), nil })
	return tracker, func() { f.trackers.Release(id) }
}

func (f *factory) newProcessor(set processor.Settings, cfg component.Config, emitsLogs bool) (*goldenProcessor, error) {
	c := cfg.(*Config)
	var tracker *driftTracker
	releaseTracker := func() {}
	if c.Drift.Enabled {
		tracker, releaseTracker = f.acquire(set.ID, c.Drift)
	}
	var carried *carriedFields
	releaseCarried := func() {}
	if c.Validation.PerService {
		carried, _ = f.carried.Acquire(set.ID, func() (*carriedFields, error) { return newCarriedFields(), nil })
		releaseCarried = func() { f.carried.Release(set.ID) }
	}
	release := func() {
		releaseTracker()
		releaseCarried()
	}
	p, err := newGoldenProcessor(set, c, tracker, carried, emitsLogs, release)
	if err != nil {
		release()
		return nil, err
	}
	return p, nil
}

func (f *factory) createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := f.newProcessor(set, cfg, true)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs, mutatesData, processorhelper.WithShutdown(p.shutdown))
}

func (f *factory) createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	p, err := f.newProcessor(set, cfg, false)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces, mutatesData, processorhelper.WithShutdown(p.shutdown))
}

// Metrics carry no golden fields: they pass through untouched.
func createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	return processorhelper.NewMetrics(ctx, set, cfg, next, func(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
		return md, nil
	})
}
