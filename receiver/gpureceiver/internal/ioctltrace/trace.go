package ioctltrace // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

var (
	// ErrPrivileges is returned when the process may not load or attach
	// BPF programs.
	ErrPrivileges = errors.New("tracing ioctls needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, or root)")
	// ErrNoDevices is returned when no configured device exists.
	ErrNoDevices = errors.New("no device to trace")
	// ErrUnsupported is returned on platforms without the BPF program.
	ErrUnsupported = errors.New("ioctl tracing is built for linux/amd64 only")
)

// NoDevicesError is ErrNoDevices naming the configured devices that are
// not registered.
func NoDevicesError(missing []string) error {
	return fmt.Errorf("%w: none of the configured devices is registered in /proc/devices (%s)", ErrNoDevices, strings.Join(missing, ", "))
}

// Attach is how the BPF programs hook the ioctl syscall.
type Attach string

const (
	// AttachAuto tries fentry and falls back to tracepoints.
	AttachAuto Attach = ""
	// AttachFentry uses BPF trampolines on the syscall (cheapest; needs
	// kernel BTF and trampoline support).
	AttachFentry Attach = "fentry"
	// AttachRawTracepoint uses the BTF raw tracepoints sys_enter and
	// sys_exit, filtered to ioctl in the program.
	AttachRawTracepoint Attach = "raw_tracepoint"
	// AttachTracepoint uses the syscalls:sys_{enter,exit}_ioctl
	// tracepoints (needs tracefs).
	AttachTracepoint Attach = "tracepoint"
)

// Options configure a Tracer.
type Options struct {
	Devices        []DeviceMatch
	SlowThreshold  time.Duration
	RingBufferSize int
	// DriverVersion picks the parameter layouts; empty reads
	// /sys/module/nvidia/version, and without a loaded driver the newest
	// layouts are used.
	DriverVersion string
	Attach        Attach
	Logger        *zap.Logger
	// ProcDevices opens the kernel's list of registered drivers; nil opens
	// /proc/devices.
	ProcDevices func() (io.ReadCloser, error)
	// probeReadFiles makes the BPF program read struct file by probe reads
	// as on kernels before 6.2, for the tests of that path.
	probeReadFiles bool
	// statCacheSlots replaces the counter cache's size per CPU (a power of
	// two), for the tests of its collisions.
	statCacheSlots int
	// ringPollInterval replaces how often the reader looks at the ring
	// unwoken, for the tests of the wakeups.
	ringPollInterval time.Duration
}

// resolve finds the configured devices registered now.
func (o Options) resolve() (filters []deviceFilter, missing []string, err error) {
	open := o.ProcDevices
	if open == nil {
		open = openProcDevices
	}
	procDevices, err := open()
	if err != nil {
		return nil, nil, fmt.Errorf("reading /proc/devices: %w", err)
	}
	defer procDevices.Close()
	return resolve(o.Devices, procDevices)
}

// newestLayouts is the driver version assumed when none is known.
var newestLayouts = DriverVersion{Major: 595, Minor: 45}

// Layouts says which driver version's parameter layouts are in use, and why.
type Layouts struct {
	Version DriverVersion
	Source  string // "ioctl.driver_version", "/sys/module/nvidia/version", or "no driver loaded: the newest known"
}

func (l Layouts) String() string { return l.Version.String() + " (" + l.Source + ")" }

func (o Options) layouts() (Layouts, error) {
	if o.DriverVersion != "" {
		v, err := ParseDriverVersion(o.DriverVersion)
		return Layouts{v, "ioctl.driver_version"}, err
	}
	b, readErr := os.ReadFile("/sys/module/nvidia/version")
	if readErr != nil {
		// Nothing to trace until a driver is loaded; then its calls are read
		// with the newest layouts until the next start.
		return Layouts{newestLayouts, "no driver loaded: the newest known"}, nil //nolint:nilerr // a missing driver is not an error here
	}
	v, err := ParseDriverVersion(string(b))
	if err != nil {
		return Layouts{}, fmt.Errorf("/sys/module/nvidia/version: %w; set ioctl.driver_version", err)
	}
	return Layouts{v, "/sys/module/nvidia/version"}, nil
}

// Outcome is how a call ended: the syscall's errno (0 when it returned
// 0) and the NV_STATUS read from the parameters after the call, when a
// layout is known for the call. The driver reports its failures in the
// status and returns 0; with an errno the status is what the caller left.
type Outcome struct {
	Errno       unix.Errno
	Status      uint32
	StatusKnown bool
}

// statusNone is the BPF program's status when no layout is known.
const statusNone = 0xffffffff

func outcomeOf(status uint32, err int32) Outcome {
	o := Outcome{Status: status, StatusKnown: status != statusNone}
	if err < 0 {
		o.Errno = unix.Errno(-err)
	}
	if !o.StatusKnown {
		o.Status = 0
	}
	return o
}

// Failed reports a syscall error or a status other than NV_OK.
func (o Outcome) Failed() bool { return o.Errno != 0 || (o.StatusKnown && o.Status != 0) }

// StatusName is the NV_STATUS name, or unknown.
func (o Outcome) StatusName() string {
	if !o.StatusKnown {
		return "unknown"
	}
	return StatusName(o.Status)
}

// ErrnoName is the errno's name (ENOTTY, EINVAL, …), or none.
func (o Outcome) ErrnoName() string {
	if o.Errno == 0 {
		return "none"
	}
	if name := unix.ErrnoName(o.Errno); name != "" {
		return name
	}
	return fmt.Sprint(int(o.Errno))
}

// Event is one failed or slow call.
type Event struct {
	Time    time.Time
	Latency time.Duration
	// PID and TID are the host's (the initial pid namespace's); NSPID and
	// NSTID are what the process sees in its own pid namespace, the numbers
	// its own telemetry reports. They are equal outside containers.
	PID, TID     uint32
	NSPID, NSTID uint32
	CgroupID     uint64
	// ContainerID and PodUID come from the process's cgroup names; empty
	// outside containers.
	ContainerID string
	PodUID      string
	Comm        string // the thread's
	ProcessComm string // the thread group leader's
	DeviceMajor uint32
	DeviceMinor uint32
	Kind        Kind
	Cmd         uint32 // the raw ioctl command
	Escape      string
	Size        uint32 // the parameter size (XFER's inner size when unwrapped)
	XFER        bool
	Outcome     Outcome
	// Malformed marks a ring buffer record that could not be decoded; no
	// other field is set.
	Malformed bool
}

// HistogramBuckets is the number of latency buckets: bucket i counts
// calls that took [2^i, 2^(i+1)) nanoseconds.
const HistogramBuckets = 40

// Stat is the running total of calls of one process, escape and outcome.
type Stat struct {
	PID         uint32
	ProcessComm string
	Kind        Kind
	Nr          uint32
	Outcome     Outcome
	Calls       uint64
	SumNs       uint64
	Buckets     [HistogramBuckets]uint64
}
