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

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// NewFactory returns the gpu receiver factory.
func NewFactory() receiver.Factory {
	f := &factory{receivers: map[component.ID]*gpuReceiver{}}
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
			SlowThreshold:  100 * time.Millisecond,
			RingBufferSize: 1 << 20,
			MaxProcesses:   256,
		},
	}
}

// factory shares one gpuReceiver per component ID between the metrics and
// logs receivers.
type factory struct {
	mu        sync.Mutex
	receivers map[component.ID]*gpuReceiver
}

func (f *factory) shared(set receiver.Settings, cfg *Config) (*gpuReceiver, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.receivers[set.ID]; ok {
		return r, nil
	}
	r, err := newGPUReceiver(cfg, set)
	if err != nil {
		return nil, err
	}
	f.receivers[set.ID] = r
	return r, nil
}

func (f *factory) createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	c := cfg.(*Config)
	r, err := f.shared(set, c)
	if err != nil {
		return nil, err
	}
	s := &gpuScraper{r: r}
	scrp, err := scraper.NewMetrics(s.scrape, scraper.WithStart(s.Start), scraper.WithShutdown(s.Shutdown))
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&c.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, scrp))
}

func (f *factory) createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	r, err := f.shared(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	r.setLogs(next)
	return &logsReceiver{r: r}, nil
}

// logsReceiver sends XID, memory-high and ioctl events; the work is done
// by the shared gpuReceiver.
type logsReceiver struct {
	r       *gpuReceiver
	started bool
}

func (l *logsReceiver) Start(_ context.Context, host component.Host) error {
	l.started = true
	l.r.acquire(host)
	return nil
}

func (l *logsReceiver) Shutdown(ctx context.Context) error {
	if !l.started {
		return nil
	}
	l.started = false
	return l.r.release(ctx)
}
