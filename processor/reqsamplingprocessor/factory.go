//go:generate ../../.tools/mdatagen metadata.yaml

// Package reqsamplingprocessor samples requests, not records: it buffers the
// logs and spans of each request (by req_id, else trace id), decides once
// per request with ordered policies and a base rate that every collector
// instance draws the same (ARCHITECTURE.md §6), and keeps or drops all of the
// request's records together. It learns by itself which inputs fail.
package reqsamplingprocessor // import "github.com/loom-otel/loom/processor/reqsamplingprocessor"

import (
	"context"
	"runtime"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/loom-otel/loom/internal/ring"
	"github.com/loom-otel/loom/internal/sharedcomponent"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
)

// Records are held and filtered in place until their request is decided.
var mutatesData = consumer.WithCapabilities(consumer.Capabilities{MutatesData: true})

// NewFactory returns the reqsampling processor factory.
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
		DecisionWait:   30 * time.Second,
		MaxRequests:    50_000,
		MaxBytes:       256 << 20,
		DecisionCache:  DecisionCacheConfig{TTL: 5 * time.Minute, MaxEntries: 200_000},
		BasePercentage: 1,
		// The failure model's detectors (internal/failure) and the inputs
		// learned to fail; no rule that keeps a common, healthy event.
		Policies: []PolicyConfig{
			{Name: "errors", Type: Errors, Errors: ErrorsConfig{MinSeverity: "error"}},
			{Name: "latency", Type: Latency},
			{Name: "value_drift", Type: ValueDrift},
			{Name: "hot_input", Type: HotInput},
		},
		VolumeGuard:    VolumeGuardConfig{MaxShare: 0.05},
		CompactWaiting: true,
		NumShards:      runtime.GOMAXPROCS(0),
		Learning: LearningConfig{
			HalfLife:       time.Hour,
			MinFailures:    3,
			MinFailureRate: 0.2,
			PrefixLength:   2,
			MaxHashes:      100_000,
		},
		Share: ShareConfig{
			Server:   confighttp.NewDefaultServerConfig(),
			Client:   shareClientDefaults(),
			Interval: time.Second,
			MaxBytes: 1 << 20,
		},
		Handover: HandoverConfig{
			Client:  configgrpc.NewDefaultClientConfig(),
			Timeout: 5 * time.Second,
		},
	}
}

func shareClientDefaults() confighttp.ClientConfig {
	c := confighttp.NewDefaultClientConfig()
	c.Timeout = 5 * time.Second
	return c
}

// factory shares one sampler per component ID between the logs and traces
// processors (of every pipeline using the ID), so that a request's logs and
// spans share one fate; each processor's records return to its own pipeline.
type factory struct {
	samplers sharedcomponent.Registry[*sampler]
}

// acquire returns the sampler of set.ID, creating it on first use.
func (f *factory) acquire(set processor.Settings, cfg *Config) (*sampler, error) {
	return f.samplers.Acquire(set.ID, func() (*sampler, error) { return newSampler(set, cfg) })
}

// shutdown is one processor's: it flushes what is pending, and the last
// processor of the sampler stops it.
func (f *factory) shutdown(ctx context.Context, id component.ID, s *sampler) error {
	if f.samplers.Release(id) {
		return s.shutdown(ctx)
	}
	return s.flush(ctx)
}

func (f *factory) createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	s, err := f.acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	to := s.addOutlet(&outlet{signal: signalLogs, logs: next})
	logs, err := consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		if s.handover != nil {
			if ld = logsLayout.arriving(s.handover, ctx, ld); ld.LogRecordCount() == 0 {
				return nil
			}
		}
		sc := s.scanners.Get().(*scanner)
		b := sc.scanLogs(ld)
		s.scanners.Put(sc)
		return s.submit(ctx, to, b)
	}, mutatesData)
	if err != nil {
		return nil, err
	}
	return &logsProcessor{lifecycle: f.lifecycle(set.ID, s, signalLogs), Logs: logs}, nil
}

func (f *factory) createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	s, err := f.acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	to := s.addOutlet(&outlet{signal: signalTraces, traces: next})
	traces, err := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if s.handover != nil {
			if td = tracesLayout.arriving(s.handover, ctx, td); td.SpanCount() == 0 {
				return nil
			}
		}
		sc := s.scanners.Get().(*scanner)
		b := sc.scanTraces(td)
		s.scanners.Put(sc)
		return s.submit(ctx, to, b)
	}, mutatesData)
	if err != nil {
		return nil, err
	}
	return &tracesProcessor{lifecycle: f.lifecycle(set.ID, s, signalTraces), Traces: traces}, nil
}

// lifecycle starts the sampler with the first processor and replays sig's
// records as sig's processor starts; on each processor's shutdown, it
// flushes the sampler or stops it with the last.
func (f *factory) lifecycle(id component.ID, s *sampler, sig signal) lifecycle {
	return lifecycle{
		StartFunc:    func(ctx context.Context, host component.Host) error { return s.start(ctx, host, sig) },
		ShutdownFunc: func(ctx context.Context) error { return f.shutdown(ctx, id, s) },
	}
}

// The processors are not built with processorhelper: their records are
// passed on once their request is decided, by the sampler, not on return
// from the call, so processorhelper's otelcol_processor_outgoing_items
// would read 0. otelcol_processor_reqsampling_records counts what is passed
// on and what is dropped.
type lifecycle struct {
	component.StartFunc
	component.ShutdownFunc
}

type logsProcessor struct {
	lifecycle
	consumer.Logs
}

type tracesProcessor struct {
	lifecycle
	consumer.Traces
}

// option is a test seam, set through Config.options.
type option func(*sampler)

// withClock replaces the wall clock.
func withClock(now func() time.Time) option { return func(s *sampler) { s.now = now } }

// withTicks replaces the ticker: every channel received is a tick, closed
// once the tick is done.
func withTicks(ticks <-chan chan struct{}) option { return func(s *sampler) { s.testTicks = ticks } }

// withPushes pushes learned state to the peers when the test sends an ack
// channel (closed once pushed), instead of every share::interval.
func withPushes(pushes <-chan chan struct{}) option {
	return func(s *sampler) { s.testPushes = pushes }
}

// withMembers replaces the hand-over's resolver, so that a test changes the gateway set.
func withMembers(r ring.Resolver) option { return func(s *sampler) { s.testMembers = r } }
