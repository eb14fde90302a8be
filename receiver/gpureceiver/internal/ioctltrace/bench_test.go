//go:build linux && amd64

package ioctltrace

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The overhead benchmarks run one ioctl loop three ways, side by side:
// untraced, traced by this package, and under `strace -f -e trace=ioctl`.
// strace needs a process of its own, so every variant runs the loop in a
// child (this test binary in loop mode) and reports the child's time per
// call as ns/op.
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
// per call: the worst case.
func runLoop(spec string) int {
	kind, nStr, _ := strings.Cut(spec, ":")
	n, err := strconv.Atoi(nStr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad", loopEnv, spec)
		return 2
	}
	if kind == "getppid" {
		start := time.Now()
		for range n {
			_, _, _ = unix.Syscall(unix.SYS_GETPPID, 0, 0, 0)
		}
		fmt.Println(time.Since(start).Nanoseconds())
		return 0
	}
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
	arg := uintptr(unsafe.Pointer(&buf[0]))
	start := time.Now()
	for range n {
		_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), cmd, arg)
	}
	fmt.Println(time.Since(start).Nanoseconds())
	return 0
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
	ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		b.Fatalf("loop output %q: %v", out, err)
	}
	b.ReportMetric(ns/float64(b.N), "ns/op")
}

func benchOverhead(b *testing.B, kind string, device string) {
	b.Run("baseline-untraced", func(b *testing.B) { benchLoop(b, kind) })
	benchTraced(b, kind, device)
	b.Run("strace", func(b *testing.B) {
		strace, err := exec.LookPath("strace")
		if err != nil {
			b.Fatal("strace is not installed: apt-get install strace")
		}
		benchLoop(b, kind, strace, "-f", "-qq", "-e", "trace=ioctl", "-o", "/dev/null")
	})
}

// benchTraced runs the loop traced the way the receiver attaches here
// (traced: its metric fentry is 1 when that was fentry), and with the raw
// tracepoints, the last resort.
func benchTraced(b *testing.B, kind, device string) {
	for name, attach := range map[string]Attach{"traced": AttachAuto, "traced-raw-tracepoints": AttachRawTracepoint} {
		b.Run(name, func(b *testing.B) {
			tr, err := Start(Options{
				Devices:        []DeviceMatch{{Path: device}},
				SlowThreshold:  time.Hour,
				RingBufferSize: 1 << 20,
				Attach:         attach,
			}, func(Event) {})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = tr.Close() }()
			benchLoop(b, kind)
			if attach == AttachAuto {
				b.ReportMetric(attachCode(tr.Attach()), "fentry")
			}
		})
	}
}

func attachCode(a Attach) float64 {
	if a == AttachFentry {
		return 1
	}
	return 0
}

func BenchmarkIoctlOverheadSucceeding(b *testing.B) { benchOverhead(b, "ok", "/dev/urandom") }

func BenchmarkIoctlOverheadFailing(b *testing.B) { benchOverhead(b, "failing", "/dev/null") }

// BenchmarkOtherSyscallOverhead is what every other syscall on the host
// pays while the tracer runs (getppid here): the syscall hooks fire for all
// of them.
func BenchmarkOtherSyscallOverhead(b *testing.B) {
	b.Run("baseline-untraced", func(b *testing.B) { benchLoop(b, "getppid") })
	benchTraced(b, "getppid", "/dev/null")
}
