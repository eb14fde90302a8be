package gpureceiver // import "github.com/loom-otel/loom/receiver/gpureceiver"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

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
	s.r.mu.Lock()
	tracer, src := s.r.tracer, s.r.nvml
	s.r.mu.Unlock()

	var errs []error
	var series []*callSeries
	if tracer != nil {
		stats, err := tracer.Stats()
		if err != nil {
			errs = append(errs, err)
		}
		series = s.r.calls.update(stats)
		for _, c := range series {
			s.mb.RecordNvidiaIoctlCallsDataPoint(now, int64(c.calls), int64(c.key.pid), c.key.command,
				c.key.escape, c.key.status, c.key.errno)
		}
		s.r.countLost(tracer)
		rb := s.mb.NewResourceBuilder()
		rb.SetHostName(s.r.hostName)
		s.mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
	if src != nil {
		logs, err := src.Scrape(s.mb, now)
		if err != nil {
			errs = append(errs, err)
		}
		s.r.addLogs(logs)
	}
	md := s.mb.Emit()
	if len(series) > 0 {
		appendDurationHistogram(s.ioctlMetrics(md), series, s.start, now)
	}
	return md, errors.Join(errs...)
}

// ioctlMetrics returns the metric slice of the host-only resource that
// holds the ioctl metrics, adding it when the calls metric is disabled.
func (s *gpuScraper) ioctlMetrics(md pmetric.Metrics) pmetric.MetricSlice {
	if md.ResourceMetrics().Len() > 0 {
		rm := md.ResourceMetrics().At(0)
		if _, isDevice := rm.Resource().Attributes().Get("hw.id"); !isDevice && rm.ScopeMetrics().Len() > 0 {
			return rm.ScopeMetrics().At(0).Metrics()
		}
	}
	rm := pmetric.NewResourceMetrics()
	rm.Resource().Attributes().PutStr(string(semconv.HostNameKey), s.r.hostName)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	rm.MoveTo(md.ResourceMetrics().AppendEmpty())
	return md.ResourceMetrics().At(md.ResourceMetrics().Len() - 1).ScopeMetrics().At(0).Metrics()
}

// lostCounts are the tracer's loss counters already added to telemetry.
type lostCounts struct{ dropped, untracked uint64 }

func (r *gpuReceiver) countLost(tracer *ioctltrace.Tracer) {
	dropped, untracked, err := tracer.Lost()
	if err != nil {
		return
	}
	ctx := context.Background()
	if dropped > r.lost.dropped {
		r.telemetry.ReceiverGpuIoctlEventsDropped.Add(ctx, int64(dropped-r.lost.dropped))
	}
	if untracked > r.lost.untracked {
		r.telemetry.ReceiverGpuIoctlCallsUntracked.Add(ctx, int64(untracked-r.lost.untracked))
	}
	r.lost = lostCounts{dropped, untracked}
}
