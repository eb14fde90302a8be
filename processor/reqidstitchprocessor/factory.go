//go:generate ../../.tools/mdatagen metadata.yaml

// Package reqidstitchprocessor makes every record of a request carry both its
// req_id and trace context (ARCHITECTURE.md §3, §5): it binds req_id ↔ trace ids
// across signals, fills the id a record lacks from the other, links detached
// async work to its request, attributes GPU events to requests by host, pid,
// thread and time, gives every record its event.id and adds causal edges.
package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/sharedcomponent"
	"github.com/loom-otel/loom/processor/reqidstitchprocessor/internal/metadata"
)

var mutatesData = processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true})

// NewFactory returns the reqidstitch processor factory.
func NewFactory() processor.Factory {
	f := &factory{}
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithLogs(f.createLogs, metadata.LogsStability),
		processor.WithTraces(f.createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		MaxRequests: 100_000,
		TTL:         5 * time.Minute,
		Hold: HoldConfig{
			Duration:   2 * time.Second,
			MaxRecords: 10_000,
			MaxBytes:   16 << 20,
		},
		KeyByTrace:   true,
		LinkDetached: true,
		GPUAttribution: GPUAttributionConfig{
			Enabled:         true,
			Condition:       `instrumentation_scope.name == ` + strconv.Quote(golden.GPUEventScope),
			Wait:            10 * time.Second,
			MaxProcesses:    1024,
			SpansPerProcess: 4096,
		},
		Rules:       defaultRules(),
		MaxRuleKeys: 10_000,
	}
}

// attr spells an OTTL path to a record attribute.
func attr(name string) string { return `attributes[` + strconv.Quote(name) + `]` }

// defaultRules are the causal patterns every inference service shows. The two
// request-keyed ones (req_id) belong on gateways, the GPU-keyed one on agents.
func defaultRules() []RuleConfig {
	stage := attr(golden.Stage)
	failed := attr("error.type") + ` != nil`
	return []RuleConfig{
		{
			Name:     "cache_miss_trigger_inference",
			From:     `IsMatch(` + stage + `, "^cache/miss")`,
			To:       `IsMatch(` + stage + `, "^model/(inference|forward)")`,
			JoinKeys: []string{golden.ReqID},
			Window:   500 * time.Millisecond,
			EdgeType: "triggered",
		},
		{
			Name:     "gpu_oom_cause_timeout",
			From:     attr(golden.GPUMemoryUsage) + ` >= 0.95 * ` + attr(golden.GPUMemoryLimit),
			To:       attr(golden.LatencyMs) + ` > 3000`,
			JoinKeys: []string{string(semconv.HostNameKey), golden.GPUID},
			Window:   5 * time.Second,
			EdgeType: "caused_timeout",
		},
		{
			Name:     "retry_of",
			From:     failed,
			To:       attr("retry.attempt") + ` > 0 or ` + attr("http.request.resend_count") + ` > 0`,
			JoinKeys: []string{golden.ReqID},
			Window:   30 * time.Second,
			EdgeType: "retry_of",
		},
		{
			Name:     "fallback_triggered",
			From:     failed,
			To:       attr("fallback") + ` == true or IsMatch(` + stage + `, "fallback$")`,
			JoinKeys: []string{golden.ReqID},
			Window:   5 * time.Second,
			EdgeType: "fallback",
		},
	}
}

// factory shares one stitcher per component ID between its logs and traces
// processors, so that logs are filled from spans seen in the traces pipeline.
type factory struct {
	stitchers sharedcomponent.Registry[*stitcher]
}

// acquire returns the stitcher of set.ID, creating it on first use; release undoes one acquire.
func (f *factory) acquire(set processor.Settings, cfg *Config) (s *stitcher, release func(), err error) {
	s, err = f.stitchers.Acquire(set.ID, func() (*stitcher, error) { return newStitcher(set, cfg) })
	if err != nil {
		return nil, nil, err
	}
	return s, func() {
		if f.stitchers.Release(set.ID) {
			s.tel.Shutdown()
		}
	}, nil
}

func newProcessor[T any](f *factory, set processor.Settings, cfg component.Config, sig signal[T], next func(context.Context, T) error) (*stitchProcessor[T], error) {
	c := cfg.(*Config)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s, release, err := f.acquire(set, c)
	if err != nil {
		return nil, err
	}
	s.addPipeline(sig.name)
	return &stitchProcessor[T]{
		id: set.ID, s: s, sig: sig, next: next, hold: newHoldQueue[T](c.Hold),
		logger: set.Logger, release: release,
	}, nil
}

func (f *factory) createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := newProcessor(f, set, cfg, logSignal, next.ConsumeLogs)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, p.process, mutatesData,
		processorhelper.WithStart(p.start), processorhelper.WithShutdown(p.shutdown))
}

func (f *factory) createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	p, err := newProcessor(f, set, cfg, spanSignal, next.ConsumeTraces)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewTraces(ctx, set, cfg, next, p.process, mutatesData,
		processorhelper.WithStart(p.start), processorhelper.WithShutdown(p.shutdown))
}

// option is a test seam, set through Config.options.
type option func(*stitcher)

// withClock replaces the wall clock.
func withClock(now func() time.Time) option { return func(s *stitcher) { s.now = now } }

// withTicks replaces the ticker: every channel received is a tick, closed once
// all holds are swept.
func withTicks(ticks <-chan chan struct{}) option {
	return func(s *stitcher) { s.testTicks = ticks }
}
