package gpureceiver // import "github.com/loom-otel/loom/receiver/gpureceiver"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// gpuScraper records NVML metrics and the ioctl call counters each
// collection interval.
type gpuScraper struct {
	*member
	mb    *metadata.MetricsBuilder
	start pcommon.Timestamp
}

func (s *gpuScraper) Start(_ context.Context, host component.Host) error {
	s.mb = metadata.NewMetricsBuilder(s.r.cfg.MetricsBuilderConfig, s.r.set)
	s.start = pcommon.NewTimestampFromTime(time.Now())
	s.r.start(host)
	return nil
}

func (s *gpuScraper) Shutdown(ctx context.Context) error { return s.shutdown(ctx) }

func (s *gpuScraper) scrape(context.Context) (pmetric.Metrics, error) {
	now := pcommon.NewTimestampFromTime(time.Now())
	s.r.partsInUse.RLock()
	defer s.r.partsInUse.RUnlock()
	s.r.mu.Lock()
	tracer, src := s.r.tracer, s.r.nvml
	s.r.mu.Unlock()

	var errs []error
	md := pmetric.NewMetrics()
	if tracer != nil {
		stats, err := tracer.Stats()
		if err != nil {
			errs = append(errs, err)
		}
		series := s.r.calls.update(stats)
		for _, c := range series {
			s.mb.RecordNvidiaIoctlCallsDataPoint(now, int64(c.calls), int64(c.key.pid), c.key.command,
				c.key.escape, c.key.status, c.key.errno)
		}
		s.r.countLost(tracer)
		rb := s.mb.NewResourceBuilder()
		rb.SetHostName(s.r.hostName)
		res := rb.Emit()
		ioctl := s.mb.Emit(metadata.WithResource(res))
		if len(series) > 0 {
			appendDurationHistogram(ioctlMetrics(ioctl, res), series, s.start, now)
		}
		ioctl.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	if src != nil {
		logs, err := src.Scrape(s.mb, now)
		if err != nil {
			errs = append(errs, err)
		}
		s.r.addLogs(logs)
		s.mb.Emit().ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	return md, errors.Join(errs...)
}

// ioctlMetrics is where the duration histogram goes: beside the calls
// metric, or on a resource of its own when that metric is disabled.
func ioctlMetrics(ioctl pmetric.Metrics, res pcommon.Resource) pmetric.MetricSlice {
	if ioctl.ResourceMetrics().Len() == 0 {
		rm := ioctl.ResourceMetrics().AppendEmpty()
		res.CopyTo(rm.Resource())
		rm.ScopeMetrics().AppendEmpty().Scope().SetName(metadata.ScopeName)
	}
	return ioctl.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
}

// lostCounts are the tracer's loss counters already added to telemetry.
type lostCounts struct{ dropped, untracked uint64 }

func (r *gpuReceiver) countLost(tracer *ioctltrace.Tracer) {
	dropped, untracked, err := tracer.Lost()
	if err != nil {
		return
	}
	ctx := context.Background()
	r.mu.Lock() // an attached tracer resets lost under mu
	defer r.mu.Unlock()
	if dropped > r.lost.dropped {
		r.telemetry.ReceiverGpuIoctlEventsDropped.Add(ctx, int64(dropped-r.lost.dropped))
	}
	if untracked > r.lost.untracked {
		r.telemetry.ReceiverGpuIoctlCallsUntracked.Add(ctx, int64(untracked-r.lost.untracked))
	}
	r.lost = lostCounts{dropped, untracked}
}
