package kmsg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
	"github.com/loom-otel/loom/receiver/gpureceiver/internal/nvmlsource"
)

// Options configure Watch.
type Options struct {
	// Path is the kernel log: /dev/kmsg, or a file or FIFO of its lines.
	Path string
	// ProcPath is where the host's /proc is mounted: the pid the driver
	// names is resolved there to its container and namespaced pid.
	ProcPath string
	// FromStart reads what the log already holds; otherwise only lines
	// written after Watch opened it (the kernel's ring buffer keeps XIDs
	// from before the collector started, which were reported then).
	FromStart bool
	HostName  string
	// PollInterval is how often a file at its end is read again.
	PollInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Counts are what Watch saw that did not become a record.
type Counts struct {
	// Overwritten counts the times the kernel overwrote records before
	// they were read (EPIPE from /dev/kmsg).
	Overwritten int64
	// TooLong counts lines longer than any kernel log line, skipped.
	TooLong int64
}

// Watch reads the kernel log until ctx is done and calls emit with a
// gpu.xid log record for every XID line, repeats included. It returns an
// error when the log cannot be opened or read.
func Watch(ctx context.Context, opts Options, emit func(plog.Logs), counts *Counts) error {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	// O_NONBLOCK: a FIFO opens without a writer, and /dev/kmsg and FIFOs
	// are read through the runtime's poller, so Close ends a blocked read.
	f, err := os.OpenFile(opts.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("reading the kernel log %s needs root or CAP_SYSLOG (kernel.dmesg_restrict): %w", opts.Path, err)
		}
		return fmt.Errorf("opening the kernel log: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	defer func() {
		if stop() {
			_ = f.Close()
		}
	}()
	if !opts.FromStart {
		// /dev/kmsg moves past its last record; a FIFO cannot seek and has no past.
		_, _ = f.Seek(0, io.SeekEnd)
	}
	w := &watcher{opts: opts, emit: emit, counts: counts}
	buf := make([]byte, 16<<10)
	var pending []byte
	for {
		n, err := f.Read(buf)
		if n > 0 {
			pending = w.lines(append(pending, buf[:n]...))
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
		case errors.Is(err, syscall.EPIPE):
			counts.Overwritten++
		case errors.Is(err, io.EOF):
			// The end of a file, or a FIFO with no writer: look again later.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(opts.PollInterval):
			}
		default:
			return fmt.Errorf("reading the kernel log %s: %w", opts.Path, err)
		}
	}
}

type watcher struct {
	opts     Options
	emit     func(plog.Logs)
	counts   *Counts
	bootTime time.Time
}

// lines handles every complete line in b and returns what is left of the
// last, incomplete one.
func (w *watcher) lines(b []byte) []byte {
	var logs plog.Logs
	var records plog.LogRecordSlice
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		line := b[:i]
		b = b[i+1:]
		if len(line) > maxLine {
			w.counts.TooLong++
			continue
		}
		x, ok := Parse(line)
		if !ok {
			continue
		}
		if records == (plog.LogRecordSlice{}) {
			logs = plog.NewLogs()
			rl := logs.ResourceLogs().AppendEmpty()
			rl.Resource().Attributes().PutStr(string(semconv.HostNameKey), w.opts.HostName)
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(metadata.ScopeName)
			records = sl.LogRecords()
		}
		w.appendRecord(records, x)
	}
	if records != (plog.LogRecordSlice{}) {
		w.emit(logs)
	}
	if len(b) > maxLine { // a line without an end: drop it rather than grow
		w.counts.TooLong++
		return nil
	}
	return append([]byte(nil), b...)
}

// Attribute names of the kernel's XID records beyond those NVML's share.
const (
	attrXID        = "nvidia.xid"
	attrXIDDesc    = "nvidia.xid.description"
	attrXIDMessage = "nvidia.xid.message"
	attrXIDSource  = "nvidia.xid.source"
	attrPCIBusID   = "nvidia.pci.bus_id"
)

func (w *watcher) appendRecord(records plog.LogRecordSlice, x XID) {
	now := w.opts.Now()
	lr := records.AppendEmpty()
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
	ts := now
	if x.HasTimestamp {
		if boot, ok := w.boot(); ok {
			ts = boot.Add(x.SinceBoot)
		}
	}
	lr.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	lr.SetEventName(nvmlsource.EventXID)
	sev, text := nvmlsource.XIDSeverity(x.Code)
	lr.SetSeverityNumber(sev)
	lr.SetSeverityText(text)
	desc := nvmlsource.XIDDescription(x.Code)
	who := ""
	if x.PID > 0 {
		who = fmt.Sprintf(" (pid %d %s)", x.PID, x.Process)
	}
	lr.Body().SetStr(fmt.Sprintf("XID %d on PCI %s%s: %s", x.Code, x.PCI, who, cmpOr(x.Message, desc)))

	a := lr.Attributes()
	a.PutInt(attrXID, int64(x.Code))
	a.PutStr(attrXIDDesc, desc)
	a.PutStr(attrXIDSource, "kmsg")
	a.PutStr(attrPCIBusID, x.PCI)
	if x.Message != "" {
		a.PutStr(attrXIDMessage, strings.ToValidUTF8(x.Message, "\uFFFD"))
	}
	if x.PID <= 0 {
		return
	}
	a.PutInt(string(semconv.ProcessPIDKey), x.PID)
	if x.Process != "" {
		a.PutStr(string(semconv.ProcessCommandKey), strings.ToValidUTF8(x.Process, "\uFFFD"))
	}
	p := w.process(x.PID)
	if p.vpid > 0 {
		a.PutInt(string(semconv.ProcessVpidKey), p.vpid)
	}
	if p.containerID != "" {
		a.PutStr(string(semconv.ContainerIDKey), p.containerID)
	}
	if p.podUID != "" {
		a.PutStr(string(semconv.K8SPodUIDKey), p.podUID)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// boot is when the kernel's clock started, from the host's /proc/uptime,
// read once.
func (w *watcher) boot() (time.Time, bool) {
	if !w.bootTime.IsZero() {
		return w.bootTime, true
	}
	raw, err := os.ReadFile(filepath.Join(w.opts.ProcPath, "uptime"))
	if err != nil {
		return time.Time{}, false
	}
	up, _, _ := strings.Cut(strings.TrimSpace(string(raw)), " ")
	secs, err := strconv.ParseFloat(up, 64)
	if err != nil || secs < 0 {
		return time.Time{}, false
	}
	w.bootTime = w.opts.Now().Add(-time.Duration(secs * float64(time.Second)))
	return w.bootTime, true
}

type process struct {
	vpid                int64
	containerID, podUID string
}

// process resolves a host pid to the pid it sees itself under and its
// container. The process may be gone (an XID often ends it): then it is empty.
func (w *watcher) process(pid int64) process {
	var p process
	dir := filepath.Join(w.opts.ProcPath, strconv.FormatInt(pid, 10))
	if status, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				fields := strings.Fields(rest)
				if len(fields) > 0 {
					p.vpid, _ = strconv.ParseInt(fields[len(fields)-1], 10, 64)
				}
			}
		}
	}
	if cgroup, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil {
		for _, line := range strings.Split(string(cgroup), "\n") {
			if path, ok := strings.CutPrefix(line, "0::"); ok {
				p.containerID, p.podUID = ioctltrace.ContainerOfCgroupPath(path)
			}
		}
	}
	return p
}
