//go:build linux && amd64

package ioctltrace

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// The overhead benchmarks run one ioctl loop several ways, side by side:
// untraced, under empty programs on a hook (the floor), traced by this
// package on that hook, and under `strace -f -e trace=ioctl`. strace needs
// a process of its own, so every variant runs the loop in a child (this
// test binary in loop mode). ns/op is the CPU time of the child's looping
// thread per call (CLOCK_THREAD_CPUTIME_ID: the syscall and the BPF
// programs it runs, not the time spent waiting for a CPU, which on a shared
// machine is most of the wall time); wall-ns/op is the elapsed time, the
// measure for strace, whose cost is the stops.
const loopEnv = "LOOM_IOCTL_LOOP"

func TestMain(m *testing.M) {
	if spec := os.Getenv(loopEnv); spec != "" {
		os.Exit(runLoop(spec))
	}
	if os.Getenv(startEnv) != "" {
		os.Exit(tryStart())
	}
	os.Exit(m.Run())
}

// loop kinds: ok is RNDGETENTCNT on /dev/urandom, a call that succeeds and
// stays in the kernel's counters; failing is NV_ESC_RM_ALLOC on /dev/null,
// which fails (ENOTTY, NV_ERR_NO_MEMORY in the params) and sends an event
// per call: the worst case; getppid is any other syscall. It prints the
// looping thread's CPU time and the elapsed time, in ns.
func runLoop(spec string) int {
	kind, nStr, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(nStr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad", loopEnv, spec)
		return 2
	}
	trap, a1, a2, a3 := uintptr(unix.SYS_GETPPID), uintptr(0), uintptr(0), uintptr(0)
	if kind != "getppid" {
		path, cmd := "/dev/urandom", uintptr(unix.RNDGETENTCNT)
		if kind == "failing" {
			path, cmd = "/dev/null", cmdRMAlloc
		}
		fd, err := unix.Open(path, unix.O_RDWR, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		buf := params(32, 28, 0x51)
		defer runtime.KeepAlive(buf)
		trap, a1, a2, a3 = unix.SYS_IOCTL, uintptr(fd), cmd, uintptr(unsafe.Pointer(&buf[0]))
	}
	runtime.LockOSThread()
	cpu0, start := threadCPU(), time.Now()
	for range n {
		_, _, _ = unix.Syscall(trap, a1, a2, a3)
	}
	wall, cpu := time.Since(start), threadCPU()-cpu0
	fmt.Println(cpu.Nanoseconds(), wall.Nanoseconds())
	return 0
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func benchLoop(b *testing.B, kind string, wrap ...string) {
	args := append(wrap, os.Args[0], "-test.run=^$")
	c := exec.Command(args[0], args[1:]...)
	c.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d", loopEnv, kind, b.N))
	c.Stderr = os.Stderr
	b.ResetTimer()
	out, err := c.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("loop %v: %v", args, err)
	}
	var cpu, wall float64
	if _, err := fmt.Sscan(string(out), &cpu, &wall); err != nil {
		b.Fatalf("loop output %q: %v", out, err)
	}
	b.ReportMetric(cpu/float64(b.N), "ns/op")
	b.ReportMetric(wall/float64(b.N), "wall-ns/op")
}

// The hooks the tracer can use, by the names of their benchmarks: each is
// measured with the tracer on it and with the floor, empty programs on the
// same hook.
var benchHooks = []struct {
	name                  string
	mode                  Attach
	floorEnter, floorExit string
}{
	{"tracepoint", AttachTracepoint, floorProgFloorTpEnter, floorProgFloorTpExit},
	{"raw-tracepoint", AttachRawTracepoint, floorProgFloorRawEnter, floorProgFloorRawExit},
	{"fentry", AttachFentry, floorProgFloorFentry, floorProgFloorFexit},
}

// benchOverhead runs one loop untraced, under each hook's floor and under
// the tracer on that hook (tracing the major of the loops' devices, as the
// receiver traces NVIDIA's), and, for the ioctl loops, under strace.
func benchOverhead(b *testing.B, kind string, withStrace bool) {
	b.Run("baseline-untraced", func(b *testing.B) { benchLoop(b, kind) })
	for _, h := range benchHooks {
		b.Run("floor-"+h.name, func(b *testing.B) {
			spec, err := loadFloor()
			if err != nil {
				b.Fatal(err)
			}
			links, err := linkPair(spec, h.mode, h.floorEnter, h.floorExit, nil)
			if err != nil {
				skipUnavailable(b, h.mode, err)
			}
			defer func() { _ = unlink(links) }()
			benchLoop(b, kind)
		})
		b.Run("traced-"+h.name, func(b *testing.B) {
			tr, err := Start(Options{
				Devices:        []DeviceMatch{{Major: &memMajor}},
				SlowThreshold:  time.Hour,
				RingBufferSize: 1 << 20,
				Attach:         h.mode,
			}, func(Event) {})
			if err != nil {
				skipUnavailable(b, h.mode, err)
			}
			defer func() { _ = tr.Close() }()
			benchLoop(b, kind)
		})
	}
	if !withStrace {
		return
	}
	b.Run("strace", func(b *testing.B) {
		strace, err := exec.LookPath("strace")
		if err != nil {
			b.Fatal("strace is not installed: apt-get install strace")
		}
		benchLoop(b, kind, strace, "-f", "-qq", "-e", "trace=ioctl", "-o", "/dev/null")
	})
}

// skipUnavailable skips the hook this kernel does not offer (fentry where
// BPF trampolines cannot attach to the syscall, as on the CI machine) and
// fails on any other hook.
func skipUnavailable(b *testing.B, mode Attach, err error) {
	b.Helper()
	if mode == AttachFentry {
		b.Skipf("fentry is not available on this kernel: %v", err)
	}
	b.Fatal(err)
}

func BenchmarkIoctlOverheadSucceeding(b *testing.B) {
	benchOverhead(b, "ok", true)
}

func BenchmarkIoctlOverheadFailing(b *testing.B) { benchOverhead(b, "failing", true) }

// BenchmarkOtherSyscallOverhead is what every other syscall on the host
// pays while the tracer runs (getppid here): the syscall hooks fire for all
// of them.
func BenchmarkOtherSyscallOverhead(b *testing.B) { benchOverhead(b, "getppid", false) }

// BenchmarkProgramTime is the tracer's own work per call, as the kernel
// counts its programs' run time (kernel.bpf_stats_enabled), for the
// succeeding and the failing ioctl loop on the syscall tracepoints: the
// part of a traced call's cost that the hook's floor does not explain,
// measured without the noise of the rest of the syscall. ns/op is the
// loop's, with the stats' own clock reads in it.
func BenchmarkProgramTime(b *testing.B) {
	for _, loop := range []struct{ name, device string }{{"succeeding", "/dev/urandom"}, {"failing", "/dev/null"}} {
		b.Run(loop.name, func(b *testing.B) {
			tr, err := Start(Options{
				Devices: []DeviceMatch{{Major: &memMajor}}, SlowThreshold: time.Hour, RingBufferSize: 1 << 20,
				Attach: AttachTracepoint,
			}, func(Event) {})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = tr.Close() }()
			stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
			if err != nil {
				b.Fatal(err)
			}
			defer stats.Close()
			before := programStats(b, tr)
			fd, err := unix.Open(loop.device, unix.O_RDWR, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = unix.Close(fd) }()
			cmd := uintptr(unix.RNDGETENTCNT)
			if loop.name == "failing" {
				cmd = cmdRMAlloc
			}
			buf := params(32, 28, 0x51)
			arg := uintptr(unsafe.Pointer(&buf[0]))
			b.ResetTimer()
			for range b.N {
				_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), cmd, arg)
			}
			b.StopTimer()
			after := programStats(b, tr)
			for i, name := range []string{"exit", "enter"} {
				runs := after[i].RunCount - before[i].RunCount
				if runs < uint64(b.N) {
					b.Fatalf("%s ran %d times for %d calls", name, runs, b.N)
				}
				// Other processes' ioctls run the programs too: per run, not per call.
				b.ReportMetric(float64(after[i].Runtime-before[i].Runtime)/float64(runs), name+"-ns/run")
			}
		})
	}
}

// programStats reads the run time counters of the tracer's programs, in
// the order they were attached (exit, enter).
func programStats(b *testing.B, tr *Tracer) []ebpf.ProgramStats {
	b.Helper()
	var out []ebpf.ProgramStats
	for _, l := range tr.links {
		info, err := l.Info()
		if err != nil {
			b.Fatal(err)
		}
		p, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			b.Fatal(err)
		}
		s, err := p.Stats()
		_ = p.Close()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, *s)
	}
	return out
}

// memMajor is the major of /dev/null and /dev/urandom: tracing it whole is
// tracing as the receiver does NVIDIA's major 195.
var memMajor = uint32(1)
