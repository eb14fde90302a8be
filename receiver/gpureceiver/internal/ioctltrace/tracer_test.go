//go:build linux && amd64

package ioctltrace

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Real NVIDIA commands (595 headers): _IOWR('F', nr, size).
const (
	cmdRMAlloc   = 0xC020462B // NV_ESC_RM_ALLOC with NVOS21, status at 28
	cmdRMControl = 0xC020462A // NV_ESC_RM_CONTROL with NVOS54, status at 28
	cmdRMFree    = 0xC0104629 // NV_ESC_RM_FREE with NVOS00, status at 12
	cmdXfer      = 0xC01046D3 // NV_ESC_IOCTL_XFER_CMD
)

type recorder struct {
	mu       sync.Mutex
	pid      uint32
	cgroupID uint64
	events   []Event
}

// add keeps the events of one process, this one unless told otherwise, or
// those of one cgroup: the tracer sees every process, and other test
// binaries trace the same devices at the same time.
func (r *recorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid := r.pid
	if pid == 0 {
		pid = uint32(os.Getpid())
	}
	if r.cgroupID != 0 && e.CgroupID != r.cgroupID || r.cgroupID == 0 && e.PID != pid {
		return
	}
	r.events = append(r.events, e)
}

func (r *recorder) waitFor(t *testing.T, n int) []Event {
	t.Helper()
	var got []Event
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		got = append([]Event(nil), r.events...)
		return len(got) >= n
	}, 5*time.Second, 10*time.Millisecond, "events seen: %+v", got)
	return got
}

func startTracer(t *testing.T, attach Attach, slow time.Duration, devices ...DeviceMatch) (*Tracer, *recorder) {
	t.Helper()
	return startTracerWith(t, Options{Attach: attach, SlowThreshold: slow, Devices: devices})
}

// startTracerWith starts a tracer with opts, a 64 KiB ring and the 595
// layouts.
func startTracerWith(t *testing.T, opts Options) (*Tracer, *recorder) {
	t.Helper()
	rec := &recorder{}
	opts.RingBufferSize, opts.DriverVersion = 1<<16, "595.45.04"
	attach := opts.Attach
	tr, err := Start(opts, rec.add)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })
	if attach != AttachAuto {
		require.Equal(t, attach, tr.Attach())
	}
	return tr, rec
}

func openDev(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	return fd
}

// params returns a parameter buffer with status at offset.
func params(size, offset int, status uint32) []byte {
	b := make([]byte, size)
	binary.NativeEndian.PutUint32(b[offset:], status)
	return b
}

func ioctl(fd int, cmd uintptr, arg unsafe.Pointer) unix.Errno {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), cmd, uintptr(arg))
	return errno
}

func TestTracesNVIDIAEscapesOnTracedDevice(t *testing.T) {
	requireRoot(t)
	// Auto takes fentry where the kernel lets BPF trampolines attach to the
	// syscall, tracepoints elsewhere (as on the CI machine, whose ftrace is
	// closed); both run the same code after the hook. The probe-reads case
	// reads struct file as on kernels before 6.2.
	for name, opts := range map[string]Options{
		"auto":                   {Attach: AttachAuto},
		"raw_tracepoint":         {Attach: AttachRawTracepoint},
		"tracepoint":             {Attach: AttachTracepoint},
		"tracepoint_probe_reads": {Attach: AttachTracepoint, probeReadFiles: true},
	} {
		t.Run(name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			opts.SlowThreshold, opts.Devices = time.Hour, []DeviceMatch{{Path: "/dev/null"}}
			tr, rec := startTracerWith(t, opts)
			null := openDev(t, "/dev/null")
			zero := openDev(t, "/dev/zero")

			alloc := params(32, 28, 0x51)
			ioctl(zero, cmdRMAlloc, unsafe.Pointer(&alloc[0])) // not traced: other device
			require.Equal(t, unix.ENOTTY, ioctl(null, cmdRMAlloc, unsafe.Pointer(&alloc[0])))

			// XFER wraps NV_ESC_RM_CONTROL; its status sits behind the pointer.
			control := params(32, 28, 0x1F)
			xfer := make([]byte, 16)
			binary.NativeEndian.PutUint32(xfer[0:], 0x2A)
			binary.NativeEndian.PutUint32(xfer[4:], 32)
			binary.NativeEndian.PutUint64(xfer[8:], uint64(uintptr(unsafe.Pointer(&control[0]))))
			ioctl(null, cmdXfer, unsafe.Pointer(&xfer[0]))
			runtime.KeepAlive(control)

			events := rec.waitFor(t, 2)
			require.Len(t, events, 2, "the /dev/zero call must not be traced")
			pid, tid := uint32(os.Getpid()), uint32(unix.Gettid())
			for _, e := range events {
				assert.Equal(t, pid, e.PID)
				assert.Equal(t, tid, e.TID)
				assert.Positive(t, e.Latency)
				assert.Equal(t, uint32(1), e.DeviceMajor)
				assert.Equal(t, uint32(3), e.DeviceMinor)
				assert.Equal(t, unix.ENOTTY, e.Outcome.Errno)
				assert.WithinDuration(t, time.Now(), e.Time, 5*time.Second)
				assert.NotEmpty(t, e.Comm)
				assert.NotZero(t, e.CgroupID)
			}
			assert.Equal(t, "NV_ESC_RM_ALLOC", events[0].Escape)
			assert.Equal(t, "NV_ERR_NO_MEMORY", events[0].Outcome.StatusName())
			assert.Equal(t, uint32(cmdRMAlloc), events[0].Cmd)
			assert.False(t, events[0].XFER)
			assert.Equal(t, "NV_ESC_RM_CONTROL", events[1].Escape)
			assert.Equal(t, "NV_ERR_INVALID_ARGUMENT", events[1].Outcome.StatusName())
			assert.True(t, events[1].XFER)
			assert.Equal(t, "ENOTTY", events[1].Outcome.ErrnoName())

			stats, err := tr.Stats()
			require.NoError(t, err)
			byEscape := map[string]Stat{}
			for _, s := range stats {
				if s.PID == pid {
					byEscape[EscapeName(s.Kind, s.Nr)] = s
				}
			}
			require.Len(t, byEscape, 2, "stats: %+v", stats)
			assert.Equal(t, uint64(1), byEscape["NV_ESC_RM_ALLOC"].Calls)
			assert.Equal(t, uint32(0x51), byEscape["NV_ESC_RM_ALLOC"].Outcome.Status)
			assert.Positive(t, byEscape["NV_ESC_RM_CONTROL"].SumNs)
			var inBuckets uint64
			for _, b := range byEscape["NV_ESC_RM_CONTROL"].Buckets {
				inBuckets += b
			}
			assert.Equal(t, uint64(1), inBuckets)
		})
	}
}

// TestSingleDeviceBesideItsWholeMajor: /dev/null traced as a uvm device
// while the rest of its major (mem, 1) is traced as rm; /dev/zero is one of
// the rest.
func TestSingleDeviceBesideItsWholeMajor(t *testing.T) {
	requireRoot(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mem := uint32(1)
	_, rec := startTracer(t, AttachAuto, time.Hour, DeviceMatch{Major: &mem}, DeviceMatch{Path: "/dev/null", Kind: KindUVM})
	zero := openDev(t, "/dev/zero")
	null := openDev(t, "/dev/null")
	alloc := params(32, 28, 0x51)
	ioctl(zero, cmdRMAlloc, unsafe.Pointer(&alloc[0]))
	const uvmMigrate = 51 // rmStatus at 72
	migrate := params(80, 72, 0x65)
	ioctl(null, uvmMigrate, unsafe.Pointer(&migrate[0]))
	// base, length, rmStatus: the length is no status (a driver on a GPU
	// left it at offset 8 after a successful call).
	const uvmFree = 34
	free := params(24, 16, 0x51)
	binary.NativeEndian.PutUint64(free[8:], 1<<30)
	ioctl(null, uvmFree, unsafe.Pointer(&free[0]))
	// A value no NV_STATUS can be, where a status should be: a layout that
	// does not fit this driver, read as no status rather than a failure.
	misread := params(80, 72, 1<<30)
	ioctl(null, uvmMigrate, unsafe.Pointer(&misread[0]))

	events := rec.waitFor(t, 4)
	require.Len(t, events, 4)
	assert.Equal(t, KindRM, events[0].Kind)
	assert.Equal(t, uint32(5), events[0].DeviceMinor)
	assert.Equal(t, "NV_ESC_RM_ALLOC", events[0].Escape)
	assert.Equal(t, KindUVM, events[1].Kind)
	assert.Equal(t, uint32(3), events[1].DeviceMinor)
	assert.Equal(t, "UVM_MIGRATE", events[1].Escape)
	assert.Equal(t, "NV_ERR_TIMEOUT", events[1].Outcome.StatusName())
	assert.Equal(t, "UVM_FREE", events[2].Escape)
	assert.Equal(t, "NV_ERR_NO_MEMORY", events[2].Outcome.StatusName())
	assert.Equal(t, "unknown", events[3].Outcome.StatusName())
}

// fakeProcDevices is a /proc/devices whose character drivers a test sets.
type fakeProcDevices struct {
	mu      sync.Mutex
	drivers string // "1 mem\n10 misc\n"
}

func (f *fakeProcDevices) set(drivers string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drivers = drivers
}

func (f *fakeProcDevices) open() (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return io.NopCloser(strings.NewReader("Character devices:\n" + f.drivers + "\nBlock devices:\n  7 loop\n")), nil
}

// TestStartAndRefreshFollowRegisteredDrivers: nothing is loaded while no
// configured device is registered; once one is, its calls are traced, and
// Refresh adds a driver registered later and drops one that went away.
func TestStartAndRefreshFollowRegisteredDrivers(t *testing.T) {
	requireRoot(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	procDevices := &fakeProcDevices{drivers: "  4 tty\n"}
	opts := Options{
		Devices:     []DeviceMatch{{Path: "/dev/null"}, {ProcDevicesName: "loomtest-rm"}},
		ProcDevices: procDevices.open, SlowThreshold: time.Hour,
	}
	_, err := Start(opts, func(Event) {})
	require.ErrorIs(t, err, ErrNoDevices)
	assert.ErrorContains(t, err, "/dev/null, loomtest-rm")

	procDevices.set("  1 mem\n")
	tr, rec := startTracerWith(t, opts)
	assert.Equal(t, []string{"loomtest-rm"}, tr.Missing())
	null, zero := openDev(t, "/dev/null"), openDev(t, "/dev/zero")
	alloc := params(32, 28, 0x51)
	ioctl(zero, cmdRMAlloc, unsafe.Pointer(&alloc[0])) // 1:5 is not /dev/null
	ioctl(null, cmdRMAlloc, unsafe.Pointer(&alloc[0]))
	require.Equal(t, uint32(3), rec.waitFor(t, 1)[0].DeviceMinor)

	// loomtest-rm is registered under major 1: now every mem device is traced.
	procDevices.set("  1 mem\n  1 loomtest-rm\n")
	traced, missing, err := tr.Refresh()
	require.NoError(t, err)
	assert.Equal(t, 2, traced)
	assert.Empty(t, missing)
	ioctl(zero, cmdRMAlloc, unsafe.Pointer(&alloc[0]))
	require.Equal(t, uint32(5), rec.waitFor(t, 2)[1].DeviceMinor)

	procDevices.set("  4 tty\n")
	traced, missing, err = tr.Refresh()
	require.NoError(t, err)
	assert.Zero(t, traced)
	assert.Equal(t, []string{"/dev/null", "loomtest-rm"}, missing)
	ioctl(zero, cmdRMAlloc, unsafe.Pointer(&alloc[0]))
	ioctl(null, cmdRMAlloc, unsafe.Pointer(&alloc[0]))
	stats, err := tr.Stats()
	require.NoError(t, err)
	calls, _ := totalOf(stats, uint32(os.Getpid()))
	assert.Equal(t, uint64(2), calls, "calls after the drivers went away are not traced")
}

func TestSuccessfulCallsAreCountedNotSent(t *testing.T) {
	requireRoot(t)
	// RNDGETENTCNT succeeds on /dev/urandom: a call that returns 0 with an
	// NVIDIA status layout (NV_ESC_RM_FREE has none at this size: unknown).
	tr, rec := startTracer(t, AttachAuto, time.Hour, DeviceMatch{Path: "/dev/urandom"})
	fd := openDev(t, "/dev/urandom")
	var entropy int32
	for range 100 {
		require.Zero(t, ioctl(fd, unix.RNDGETENTCNT, unsafe.Pointer(&entropy)))
	}
	stats, err := tr.Stats()
	require.NoError(t, err)
	var calls uint64
	for _, s := range stats {
		if s.PID == uint32(os.Getpid()) {
			calls += s.Calls
			assert.Equal(t, "unknown", s.Outcome.StatusName())
			assert.Equal(t, "none", s.Outcome.ErrnoName())
		}
	}
	assert.Equal(t, uint64(100), calls)
	time.Sleep(50 * time.Millisecond)
	rec.mu.Lock()
	assert.Empty(t, rec.events, "successful fast calls stay in the kernel")
	rec.mu.Unlock()
}

func TestSlowCallsAreSent(t *testing.T) {
	requireRoot(t)
	_, rec := startTracer(t, AttachAuto, time.Nanosecond, DeviceMatch{Path: "/dev/urandom"})
	fd := openDev(t, "/dev/urandom")
	var entropy int32
	require.Zero(t, ioctl(fd, unix.RNDGETENTCNT, unsafe.Pointer(&entropy)))
	e := rec.waitFor(t, 1)[0]
	assert.False(t, e.Outcome.Failed())
	assert.Equal(t, uint32(1), e.DeviceMajor)
	assert.Equal(t, uint32(9), e.DeviceMinor)
}

func TestFullRingBufferCountsDrops(t *testing.T) {
	requireRoot(t)
	block := make(chan struct{})
	var once sync.Once
	tr, err := Start(Options{
		Devices:        []DeviceMatch{{Path: "/dev/null"}},
		SlowThreshold:  time.Hour,
		RingBufferSize: 4096,
	}, func(Event) { once.Do(func() { <-block }) })
	require.NoError(t, err)
	defer func() { _ = tr.Close() }()
	defer close(block)
	fd := openDev(t, "/dev/null")
	buf := params(32, 28, 0x51)
	for range 1000 {
		ioctl(fd, cmdRMAlloc, unsafe.Pointer(&buf[0]))
	}
	dropped, _, err := tr.Lost()
	require.NoError(t, err)
	assert.Greater(t, dropped, uint64(900), "a 4 KiB ring holds a few dozen 112-byte events")
}

// TestAQuarterOfTheRingWakesTheReader polls the ring once an hour: events
// reach the reader only by the wakeups of the BPF program, one every
// quarter of the ring. Of 2n events in a row at least n+1 precede a
// wakeup, whatever other processes' calls on the device add to the count.
func TestAQuarterOfTheRingWakesTheReader(t *testing.T) {
	requireRoot(t)
	tr, rec := startTracerWith(t, Options{
		Attach: AttachAuto, SlowThreshold: time.Hour, Devices: []DeviceMatch{{Path: "/dev/zero"}},
		ringPollInterval: time.Hour,
	})
	n := int(wakeupEvents(tr.opts.RingBufferSize))
	require.Greater(t, n, 1)
	fd := openDev(t, "/dev/zero")
	buf := params(32, 28, 0x51)
	for range 2 * n {
		ioctl(fd, cmdRMAlloc, unsafe.Pointer(&buf[0]))
	}
	rec.waitFor(t, n+1)
	dropped, _, err := tr.Lost()
	require.NoError(t, err)
	assert.Zero(t, dropped)
}

// TestEventsNameTheContainerAndItsOwnPids runs the calling process as a
// container does: in a pid namespace of its own, nested in others as deep
// as depth, and in a cgroup named the way containerd names a Kubernetes
// container's. The events are those of the cgroup: its id is the
// directory's inode number.
func TestEventsNameTheContainerAndItsOwnPids(t *testing.T) {
	requireRoot(t)
	const (
		containerID = "4f1c6e0b9a7d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f"
		podUID      = "7e1f2a3b-4c5d-6e7f-8a9b-0c1d2e3f4a5b"
	)
	pod := filepath.Join(cgroup2Root(t), "loomtest-kubepods-besteffort-pod"+strings.ReplaceAll(podUID, "-", "_")+".slice")
	dir := filepath.Join(pod, "cri-containerd-"+containerID+".scope")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Cleanup(func() {
		_ = os.Remove(dir)
		_ = os.Remove(pod)
	})
	cgroupFD, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer func() { _ = unix.Close(cgroupFD) }()
	var cgroup unix.Stat_t
	require.NoError(t, unix.Fstat(cgroupFD, &cgroup))

	// The BPF program reads the first levels' pids by direct loads and
	// deeper ones by a probe read.
	for _, depth := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("pid-namespace-depth-%d", depth), func(t *testing.T) {
			_, rec := startTracer(t, AttachAuto, time.Hour, DeviceMatch{Path: "/dev/null"})
			rec.mu.Lock()
			rec.cgroupID = cgroup.Ino
			rec.mu.Unlock()
			var args []string
			for range depth - 1 {
				args = append(args, "unshare", "--pid", "--fork")
			}
			args = append(args, os.Args[0], "-test.run=^$")
			child := exec.Command(args[0], args[1:]...)
			child.Env = append(os.Environ(), loopEnv+"=failing:3")
			child.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, UseCgroupFD: true, CgroupFD: cgroupFD}
			child.Stderr = os.Stderr
			require.NoError(t, child.Run())

			// The first event carries the cgroup's names, the others its id.
			for _, e := range rec.waitFor(t, 3) {
				assert.Equal(t, uint32(1), e.NSPID, "the looping process is pid 1 of its namespace")
				assert.NotZero(t, e.NSTID)
				assert.NotEqual(t, e.TID, e.NSTID)
				assert.Equal(t, containerID, e.ContainerID)
				assert.Equal(t, podUID, e.PodUID)
			}
		})
	}
}

// startEnv makes the test binary start a tracer and report the error, for
// TestPrivileges to run it with fewer privileges.
const startEnv = "LOOM_TRACER_START"

func tryStart() int {
	tr, err := Start(Options{Devices: []DeviceMatch{{Path: "/dev/null"}}, SlowThreshold: time.Hour, RingBufferSize: 4096}, func(Event) {})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("tracing with", tr.Attach())
	return 0
}

// TestPrivileges checks what the README promises: CAP_BPF and CAP_PERFMON
// are enough without root, and without them the error says what to grant.
func TestPrivileges(t *testing.T) {
	requireRoot(t)
	// The test binary sits in a directory only root may enter: run a copy.
	dir, err := os.MkdirTemp("", "loom-privileges")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	binPath := filepath.Join(dir, "ioctltrace.test")
	require.NoError(t, os.WriteFile(binPath, bin, 0o755))

	run := func(caps ...uintptr) (string, error) {
		c := exec.Command(binPath, "-test.run=^$")
		c.Env = append(os.Environ(), startEnv+"=1")
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, AmbientCaps: caps}
		out, err := c.CombinedOutput()
		return string(out), err
	}
	out, err := run(unix.CAP_BPF, unix.CAP_PERFMON)
	require.NoError(t, err, out)
	assert.Contains(t, out, "tracing with")

	out, err = run()
	require.Error(t, err)
	assert.Contains(t, out, "tracing ioctls needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, or root)")
}

// cgroup2Root is where the cgroup v2 hierarchy is mounted; it is mounted
// in a temporary directory when it is not.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	for _, line := range strings.Split(string(mounts), "\n") {
		if before, after, ok := strings.Cut(line, " - "); ok && strings.HasPrefix(after, "cgroup2 ") {
			return strings.Fields(before)[4]
		}
	}
	dir := t.TempDir()
	require.NoError(t, unix.Mount("none", dir, "cgroup2", 0, ""))
	t.Cleanup(func() { _ = unix.Unmount(dir, 0) })
	return dir
}

func requireRoot(t *testing.T) {
	t.Helper()
	// CI runs as root; elsewhere the tests say what they need instead of
	// failing on EPERM.
	if os.Geteuid() != 0 {
		t.Fatalf("the eBPF tests need root (CAP_BPF, CAP_PERFMON); run them with sudo")
	}
}
