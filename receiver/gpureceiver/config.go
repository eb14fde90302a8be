package gpureceiver // import "github.com/loom-otel/loom/receiver/gpureceiver"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// Config is the gpu receiver's configuration.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`

	// HostName is the host.name of every resource; empty takes the OS host
	// name. In Kubernetes set it to the node name, as the services' spans
	// carry it: reqidstitch joins GPU events to spans by host.name and pid.
	HostName string `mapstructure:"host_name"`
	// NVML configures the NVML part: metrics per GPU, MIG device and
	// process, and XID errors.
	NVML NVMLConfig `mapstructure:"nvml"`
	// Ioctl configures the eBPF tracer of the driver's ioctls.
	Ioctl IoctlConfig `mapstructure:"ioctl"`
	// Kmsg configures the XID errors read from the kernel log.
	Kmsg KmsgConfig `mapstructure:"kmsg"`
}

// KmsgConfig configures the XID errors read from the kernel log: every
// XID, repeats included, and the ones NVML cannot report (79, 119, 120).
type KmsgConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Path is /dev/kmsg, or a file or FIFO of kernel log lines.
	Path string `mapstructure:"path"`
	// ProcPath is the host's /proc, where the pid an XID names is resolved
	// to its container.
	ProcPath string `mapstructure:"proc_path"`
	// FromStart reads the XIDs the kernel log already holds.
	FromStart bool `mapstructure:"from_start"`
}

// NVMLConfig configures the NVML part.
type NVMLConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// MIG reports each MIG device as its own resource when MIG mode is on.
	MIG bool `mapstructure:"mig"`
	// GPM reports Hopper GPM activity metrics where the GPU supports them.
	GPM bool `mapstructure:"gpm"`
	// XIDEvents turns XID errors into log records.
	XIDEvents bool `mapstructure:"xid_events"`
	// MemoryHighRatio is the share of device memory in use above which a
	// gpu.memory.high log record is emitted (once per crossing), the cause
	// side of reqidstitch's gpu_oom_cause_timeout rule; 0 turns it off.
	MemoryHighRatio float64 `mapstructure:"memory_high_ratio"`
}

// IoctlConfig configures the eBPF ioctl tracer.
type IoctlConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Devices are the device files whose ioctls are traced.
	Devices []ioctltrace.DeviceMatch `mapstructure:"devices"`
	// SlowThreshold makes a log record of every call that took longer.
	SlowThreshold time.Duration `mapstructure:"slow_threshold"`
	// RingBufferSize is the size in bytes of the kernel-to-user event ring:
	// a power of two and a multiple of the page size. When it is full,
	// events are dropped and counted.
	RingBufferSize int `mapstructure:"ring_buffer_size"`
	// MaxProcesses bounds the processes the call metrics keep series for;
	// beyond it the least recently seen process's series are dropped.
	MaxProcesses int `mapstructure:"max_processes"`
	// DevicePollInterval is how often /proc/devices is read for the
	// configured devices: the tracer attaches while one is registered.
	DevicePollInterval time.Duration `mapstructure:"device_poll_interval"`
	// DriverVersion overrides the driver version read from
	// /sys/module/nvidia/version, which picks the parameter layouts.
	DriverVersion string `mapstructure:"driver_version"`
}

func (c *Config) Validate() error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
		}
	}
	check(c.NVML.MemoryHighRatio >= 0 && c.NVML.MemoryHighRatio <= 1, "nvml::memory_high_ratio",
		"must be 0 (off) to 1, e.g. 0.95; got %v", c.NVML.MemoryHighRatio)
	if c.Ioctl.Enabled {
		check(len(c.Ioctl.Devices) > 0, "ioctl::devices", "list at least one device, e.g. [{major: 195}]; or set ioctl::enabled: false")
		for i, d := range c.Ioctl.Devices {
			if err := d.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("ioctl::devices::%d: %w", i, err))
			}
		}
		check(c.Ioctl.SlowThreshold > 0, "ioctl::slow_threshold", "must be positive, e.g. 100ms; got %v", c.Ioctl.SlowThreshold)
		n := c.Ioctl.RingBufferSize
		check(n >= 4096 && n&(n-1) == 0, "ioctl::ring_buffer_size",
			"must be a power of two of at least 4096 bytes, e.g. 1048576; got %d", n)
		check(c.Ioctl.MaxProcesses > 0, "ioctl::max_processes", "must be positive, e.g. 256; got %d", c.Ioctl.MaxProcesses)
		check(c.Ioctl.DevicePollInterval > 0, "ioctl::device_poll_interval", "must be positive, e.g. 10s; got %v", c.Ioctl.DevicePollInterval)
		if c.Ioctl.DriverVersion != "" {
			if _, err := ioctltrace.ParseDriverVersion(c.Ioctl.DriverVersion); err != nil {
				errs = append(errs, fmt.Errorf("ioctl::driver_version: %w", err))
			}
		}
	}
	check(!c.Kmsg.Enabled || c.Kmsg.Path != "", "kmsg::path", "must be set, e.g. /dev/kmsg; or set kmsg::enabled: false")
	if !c.NVML.Enabled && !c.Ioctl.Enabled && !c.Kmsg.Enabled {
		errs = append(errs, errors.New("nvml.enabled, ioctl.enabled and kmsg.enabled are all false: enable at least one part, or remove the receiver"))
	}
	return errors.Join(errs...)
}
