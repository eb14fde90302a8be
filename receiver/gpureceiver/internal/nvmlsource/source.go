//go:build nvml

package nvmlsource // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/nvmlsource"

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
)

// newLibrary is replaced in tests by a mock.
var newLibrary = func() nvml.Interface { return nvml.New() }

// logEvery is how often a query that keeps failing on a device is logged.
const logEvery = 5 * time.Minute

// Source reads NVIDIA GPUs through NVML. Scrape, WatchXID, DeviceByMinor and
// Close may be called from different goroutines.
type Source struct {
	lib    nvml.Interface
	opts   Options
	logger *zap.Logger
	now    func() time.Time // for rate-limiting logs

	driverVersion string
	missing       map[string]bool         // NVML functions the loaded library lacks
	gpus          []*device               // fixed at Open
	byMinor       map[uint32]string       // fixed at Open
	byHandle      map[nvml.Device]*device // XID events name the device by handle
	system        *device                 // stands for the host in queries that are not about a device

	mu       sync.Mutex // serialises Scrape and Close
	closed   bool
	done     chan struct{} // closed by Close, stops WatchXID
	watchers sync.WaitGroup

	errMu sync.Mutex // guards every device's unsupported and failures
}

// device is a GPU or a MIG device.
type device struct {
	identity
	handle nvml.Device
	index  int
	serial string

	parent *device // set on MIG devices
	gi, ci int

	migs      map[string]*device // a GPU's MIG devices seen in the last Scrape, by UUID
	memHigh   bool               // the last Scrape found memory at or above MemoryHighRatio
	gpmKnown  bool               // gpmOK has been asked
	gpmOK     bool
	gpmSample nvml.GpmSample // the previous GPM sample, nil until the first
	gpmAt     time.Time

	unsupported map[string]bool      // NVML functions that returned NOT_SUPPORTED
	failures    map[string]*failures // for rate-limiting logs
}

type failures struct {
	logged     time.Time
	suppressed int
}

func newDevice(handle nvml.Device, id identity) *device {
	return &device{identity: id, handle: handle, unsupported: map[string]bool{}, failures: map[string]*failures{}}
}

// Open initialises NVML and enumerates the GPUs.
func Open(opts Options) (*Source, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	lib := newLibrary()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		// No other NVML function may be called now: without the library
		// loaded, any call kills the process.
		return nil, initError(ret)
	}
	s := &Source{
		lib:      lib,
		opts:     opts,
		logger:   opts.Logger,
		now:      time.Now,
		byHandle: map[nvml.Device]*device{},
		byMinor:  map[uint32]string{},
		system:   newDevice(nil, identity{host: opts.HostName}),
		done:     make(chan struct{}),
		missing:  map[string]bool{},
	}
	for _, fn := range newerFunctions {
		if lib.Extensions().LookupSymbol(fn) != nil {
			s.missing[fn] = true
		}
	}
	if err := s.enumerate(); err != nil {
		_ = lib.Shutdown()
		return nil, err
	}
	return s, nil
}

// newerFunctions are NVML functions that drivers still in use lack (R470
// has neither). Calling a function the library lacks kills the process, so
// they are looked up first. The other GPM functions came with
// nvmlGpmQueryDeviceSupport and are called only when it says yes.
var newerFunctions = []string{memoryInfoV2, "nvmlGpmQueryDeviceSupport"}

// initHints say what is missing for each way nvmlInit fails.
var initHints = map[nvml.Return]string{
	nvml.ERROR_LIBRARY_NOT_FOUND:       "NVML library libnvidia-ml.so.1 not found: install the NVIDIA driver or mount it into the container (e.g. with the NVIDIA Container Toolkit)",
	nvml.ERROR_DRIVER_NOT_LOADED:       "NVIDIA kernel driver not loaded: load it (modprobe nvidia) or check that this host has an NVIDIA GPU",
	nvml.ERROR_NO_PERMISSION:           "no permission to use the NVIDIA devices: give the collector access to /dev/nvidiactl and /dev/nvidia*, or mount them into the container",
	nvml.ERROR_LIB_RM_VERSION_MISMATCH: "libnvidia-ml.so.1 does not match the loaded NVIDIA kernel driver: reboot or reload the driver after a driver upgrade, or mount the matching library",
}

// initName names the codes of initHints without calling nvmlErrorString,
// which must not be called after a failed nvmlInit.
var initName = map[nvml.Return]string{
	nvml.ERROR_LIBRARY_NOT_FOUND:       "ERROR_LIBRARY_NOT_FOUND",
	nvml.ERROR_DRIVER_NOT_LOADED:       "ERROR_DRIVER_NOT_LOADED",
	nvml.ERROR_NO_PERMISSION:           "ERROR_NO_PERMISSION",
	nvml.ERROR_LIB_RM_VERSION_MISMATCH: "ERROR_LIB_RM_VERSION_MISMATCH",
}

// initFailure is Open's error when nvmlInit fails; errors.Is matches it to
// the nvml.Return.
type initFailure struct{ ret nvml.Return }

func initError(ret nvml.Return) error { return &initFailure{ret: ret} }

func (e *initFailure) Error() string {
	hint, ok := initHints[e.ret]
	if !ok {
		return fmt.Sprintf("NVML initialisation failed: nvmlInit returned %d", int32(e.ret))
	}
	return fmt.Sprintf("%s (nvmlInit: %s)", hint, initName[e.ret])
}

func (e *initFailure) Unwrap() error { return e.ret }

func (s *Source) enumerate() error {
	s.driverVersion, _ = call(s, s.system, "nvmlSystemGetDriverVersion", s.lib.SystemGetDriverVersion)
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.failed(s.system, "nvmlDeviceGetCount", ret)
		return fmt.Errorf("cannot count the NVIDIA GPUs: nvmlDeviceGetCount: %w", ret)
	}
	for i := range n {
		h, ok := call(s, s.system, fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), func() (nvml.Device, nvml.Return) {
			return s.lib.DeviceGetHandleByIndex(i)
		})
		if !ok {
			continue
		}
		d := newDevice(h, identity{host: s.opts.HostName})
		d.index = i
		// The UUID is the device's identity in every output: without it the
		// device is left out.
		if d.id, ok = call(s, d, "nvmlDeviceGetUUID", h.GetUUID); !ok {
			continue
		}
		d.model, _ = call(s, d, "nvmlDeviceGetName", h.GetName)
		d.serial, _ = call(s, d, "nvmlDeviceGetSerial", h.GetSerial)
		if minor, ok := call(s, d, "nvmlDeviceGetMinorNumber", h.GetMinorNumber); ok {
			d.name = fmt.Sprintf("nvidia%d", minor)
			s.byMinor[uint32(minor)] = d.id
		}
		s.gpus = append(s.gpus, d)
		s.byHandle[h] = d
	}
	if len(s.gpus) == 0 {
		s.logger.Warn("NVML sees no usable NVIDIA GPU; no GPU metrics will be reported", zap.Int("count", n))
	}
	return nil
}

// DeviceByMinor maps the minor number of /dev/nvidiaN to the GPU's UUID.
// The map is built once, as it is read for every traced ioctl: callers must
// not modify it.
func (s *Source) DeviceByMinor() map[uint32]string { return s.byMinor }

// Close stops WatchXID, frees what NVML allocated and shuts NVML down. It
// is safe to call more than once.
func (s *Source) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()

	// A watcher returns within one EventSet.Wait timeout; its event set must
	// be freed before NVML shuts down.
	s.watchers.Wait()
	for _, d := range s.gpus {
		if d.gpmSample != nil {
			_ = d.gpmSample.Free()
			d.gpmSample = nil
		}
	}
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %w", ret)
	}
	return nil
}

var errClosed = errors.New("NVML source is closed")

// call runs one NVML query about d unless d is known not to support it, and
// reports whether its result can be used. fn names the NVML function, with
// its argument in parentheses where one function is asked several things.
func call[T any](s *Source, d *device, fn string, query func() (T, nvml.Return)) (T, bool) {
	var v T
	if s.isUnsupported(d, fn) {
		return v, false
	}
	v, ret := query()
	if ret != nvml.SUCCESS {
		s.failed(d, fn, ret)
		return v, false
	}
	return v, true
}

// do is call for NVML functions that return nothing but their status.
func do(s *Source, d *device, fn string, f func() nvml.Return) bool {
	_, ok := call(s, d, fn, func() (struct{}, nvml.Return) { return struct{}{}, f() })
	return ok
}

func (s *Source) isUnsupported(d *device, fn string) bool {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.missing[fn] || d.unsupported[fn]
}

// failed handles a query that did not succeed. NOT_SUPPORTED is remembered,
// so the device is not asked again: it is what the device is, not an error.
// Other failures are counted by function and logged, at most once per
// device and function every logEvery.
func (s *Source) failed(d *device, fn string, ret nvml.Return) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if ret == nvml.ERROR_NOT_SUPPORTED {
		d.unsupported[fn] = true
		s.logger.Debug("NVML query not supported; not asking again", zap.String("function", fn), zap.String("gpu.id", d.id))
		return
	}
	if tb := s.opts.Telemetry; tb != nil {
		name, _, _ := strings.Cut(fn, "(")
		tb.ReceiverGpuNvmlErrors.Add(context.Background(), 1, metric.WithAttributes(attribute.String("function", name)))
	}
	f := d.failures[fn]
	if f == nil {
		f = &failures{}
		d.failures[fn] = f
	}
	now := s.now()
	if !f.logged.IsZero() && now.Sub(f.logged) < logEvery {
		f.suppressed++
		return
	}
	s.logger.Warn("NVML query failed", zap.String("function", fn), zap.String("gpu.id", d.id),
		zap.String("error", ret.Error()), zap.Int("failures_not_logged", f.suppressed))
	f.logged, f.suppressed = now, 0
}
