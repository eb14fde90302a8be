//go:build nvml

package nvmlsource // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/nvmlsource"

import (
	"context"
	"errors"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// waitTimeout bounds each EventSet.Wait, and so how long WatchXID takes to
// notice that it should stop.
const waitTimeout = time.Second

// WatchXID calls emit with a gpu.xid log record for each XID error on a GPU
// until ctx is done or the Source is closed. It returns at once when
// Options.XIDEvents is off, the Source is closed, or no GPU reports XIDs.
func (s *Source) WatchXID(ctx context.Context, emit func(plog.Logs)) error {
	if !s.opts.XIDEvents {
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.watchers.Add(1)
	s.mu.Unlock()
	defer s.watchers.Done()

	set, ok := call(s, s.system, "nvmlEventSetCreate", s.lib.EventSetCreate)
	if !ok {
		return errors.New("cannot watch XID errors: nvmlEventSetCreate failed")
	}
	defer func() { _ = set.Free() }()
	registered := 0
	for _, d := range s.gpus {
		types, ok := call(s, d, "nvmlDeviceGetSupportedEventTypes", d.handle.GetSupportedEventTypes)
		if !ok || types&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		if do(s, d, "nvmlDeviceRegisterEvents", func() nvml.Return { return d.handle.RegisterEvents(nvml.EventTypeXidCriticalError, set) }) {
			registered++
		}
	}
	if registered == 0 {
		s.logger.Info("No GPU reports XID errors through NVML; not watching for them")
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return nil
		default:
		}
		ev, ret := set.Wait(uint32(waitTimeout.Milliseconds()))
		switch {
		case ret == nvml.ERROR_TIMEOUT:
			continue
		case ret != nvml.SUCCESS:
			s.failed(s.system, "nvmlEventSetWait", ret)
			// Don't spin on an error that persists.
			select {
			case <-ctx.Done():
			case <-s.done:
			case <-time.After(waitTimeout):
			}
			continue
		case ev.EventType&nvml.EventTypeXidCriticalError == 0:
			continue
		}
		logs := plog.NewLogs()
		appendXID(logs, s.identityOf(ev.Device), ev.EventData, pcommon.NewTimestampFromTime(time.Now()))
		emit(logs)
	}
}

// identityOf names the GPU an event is about.
func (s *Source) identityOf(h nvml.Device) identity {
	if d, ok := s.byHandle[h]; ok {
		return d.identity
	}
	id := identity{host: s.opts.HostName}
	if h != nil {
		id.id, _ = call(s, s.system, "nvmlDeviceGetUUID", h.GetUUID)
	}
	return id
}
