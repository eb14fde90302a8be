//go:generate ../../.tools/mdatagen metadata.yaml

// Package gpureceiver watches NVIDIA GPUs through NVML (metrics per GPU, MIG
// device and process; XID errors) and traces the driver's ioctls with eBPF
// (escape, NV_STATUS and latency per process and thread). Failed and slow
// calls become log records that reqidstitch attributes to requests.
package gpureceiver // import "github.com/loom-otel/loom/receiver/gpureceiver"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/loom-otel/loom/internal/sharedcomponent"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// NewFactory returns the gpu receiver factory.
func NewFactory() receiver.Factory {
	f := &factory{}
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(f.createMetrics, metadata.MetricsStability),
		receiver.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

func createDefaultConfig() component.Config {
	controller := scraperhelper.NewDefaultControllerConfig()
	controller.CollectionInterval = 10 * time.Second
	nvidia := uint32(ioctltrace.NVIDIAMajor)
	return &Config{
		ControllerConfig:     controller,
		MetricsBuilderConfig: metadata.NewDefaultMetricsBuilderConfig(),
		NVML: NVMLConfig{
			Enabled:         true,
			MIG:             true,
			GPM:             true,
			XIDEvents:       true,
			MemoryHighRatio: 0.95,
		},
		Ioctl: IoctlConfig{
			Enabled: true,
			Devices: []ioctltrace.DeviceMatch{
				{Major: &nvidia, Kind: ioctltrace.KindRM},
				{ProcDevicesName: "nvidia-uvm", Kind: ioctltrace.KindUVM},
			},
			SlowThreshold:      100 * time.Millisecond,
			RingBufferSize:     1 << 20,
			MaxProcesses:       256,
			DevicePollInterval: 10 * time.Second,
		},
		Kmsg: KmsgConfig{Enabled: true, Path: "/dev/kmsg", ProcPath: "/proc"},
	}
}

// factory shares one gpuReceiver per component ID between the metrics and
// logs receivers.
type factory struct {
	receivers sharedcomponent.Registry[*gpuReceiver]
}

func (f *factory) join(set receiver.Settings, cfg *Config) (*member, error) {
	r, err := f.receivers.Acquire(set.ID, func() (*gpuReceiver, error) { return newGPUReceiver(cfg, set) })
	if err != nil {
		return nil, err
	}
	return &member{f: f, id: set.ID, r: r}, nil
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	c := cfg.(*Config)
	m, err := f.join(set, c)
	if err != nil {
		return nil, err
	}
	s := &gpuScraper{member: m}
	scrp, err := scraper.NewMetrics(s.scrape, scraper.WithStart(s.Start), scraper.WithShutdown(s.Shutdown))
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&c.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, scrp))
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	m, err := f.join(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	m.r.setLogs(next)
	return &logsReceiver{member: m}, nil
}

// member is one of the components (the logs or the metrics receiver) that
// share a gpuReceiver; the last to shut down stops it.
type member struct {
	f        *factory
	id       component.ID
	r        *gpuReceiver
	released sync.Once
}

func (m *member) shutdown(ctx context.Context) error {
	var err error
	m.released.Do(func() {
		if m.f.receivers.Release(m.id) {
			err = m.r.shutdown(ctx)
		}
	})
	return err
}

// logsReceiver sends XID, memory-high and ioctl events; the work is done
// by the shared gpuReceiver.
type logsReceiver struct{ *member }

func (l *logsReceiver) Start(_ context.Context, host component.Host) error {
	l.r.start(host)
	return nil
}

func (l *logsReceiver) Shutdown(ctx context.Context) error { return l.shutdown(ctx) }
