// Package kmsg reads NVIDIA XID errors from the kernel log (/dev/kmsg, or
// any file or FIFO of its lines) and turns each into a gpu.xid log record,
// with the process the driver names and its container.
package kmsg // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/kmsg"

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// XID is one XID line of the kernel log.
type XID struct {
	// Code is the XID number, e.g. 79.
	Code uint64
	// PCI is the device's PCI address as the driver prints it, e.g. 0000:3b:00.
	PCI string
	// PID and Process name the process whose channel the error hit, when
	// the driver prints them (0 and "" for pid='<unknown>').
	PID     int64
	Process string
	// Message is the rest of the line: what the driver says about it.
	Message string
	// SinceBoot is the kernel's timestamp of the line, when it has one.
	SinceBoot    time.Duration
	HasTimestamp bool
}

// maxLine bounds a kernel log line; the kernel's own limit is 1 KiB of text
// plus the dictionary.
const maxLine = 8 << 10

var xidMarker = []byte("NVRM: Xid (")

// Parse reads one line of the kernel log: a /dev/kmsg record
// ("6,1234,5678901234,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=…"), a dmesg
// line ("[ 5678.901234] NVRM: Xid …") or the bare message. ok is false for
// a line that is not an XID, and for continuation lines.
func Parse(line []byte) (x XID, ok bool) {
	if len(line) > maxLine || len(line) == 0 || line[0] == ' ' {
		return XID{}, false
	}
	i := bytes.Index(line, xidMarker)
	if i < 0 {
		return XID{}, false
	}
	x.SinceBoot, x.HasTimestamp = timestamp(line[:i])
	rest := string(line[i+len(xidMarker):])
	closing := strings.Index(rest, "): ")
	if closing < 0 {
		return XID{}, false
	}
	x.PCI = strings.TrimPrefix(rest[:closing], "PCI:")
	if x.PCI == "" || !isPCI(x.PCI) {
		return XID{}, false
	}
	rest = rest[closing+3:]
	code, rest, _ := strings.Cut(rest, ",")
	n, err := strconv.ParseUint(strings.TrimSpace(code), 10, 16)
	if err != nil {
		return XID{}, false
	}
	x.Code = n
	rest = strings.TrimSpace(rest)
	if v, after, found := field(rest, "pid="); found {
		x.PID, _ = strconv.ParseInt(strings.Trim(v, "'"), 10, 64)
		rest = after
	}
	if v, after, found := field(rest, "name="); found {
		if v != "<unknown>" {
			x.Process = v
		}
		rest = after
	}
	x.Message = strings.TrimRight(rest, "\r\n")
	return x, true
}

// field reads "key=value," at the start of s.
func field(s, key string) (value, rest string, ok bool) {
	after, found := strings.CutPrefix(s, key)
	if !found {
		return "", s, false
	}
	value, rest, _ = strings.Cut(after, ",")
	return strings.TrimSpace(value), strings.TrimSpace(rest), true
}

// timestamp reads the time since boot in what precedes the message: the
// third field of a /dev/kmsg record (microseconds) or a dmesg [seconds.micros].
func timestamp(prefix []byte) (time.Duration, bool) {
	p := strings.TrimSpace(string(prefix))
	if strings.HasPrefix(p, "[") {
		end := strings.IndexByte(p, ']')
		if end < 0 {
			return 0, false
		}
		secs, err := strconv.ParseFloat(strings.TrimSpace(p[1:end]), 64)
		if err != nil || secs < 0 || secs > 1e10 {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	header, _, found := strings.Cut(p, ";")
	if !found {
		return 0, false
	}
	fields := strings.Split(header, ",")
	if len(fields) < 3 {
		return 0, false
	}
	us, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || us < 0 || us > int64(1e16) {
		return 0, false
	}
	return time.Duration(us) * time.Microsecond, true
}

// isPCI accepts hex digits, ':' and '.', as in 0000:3b:00 or 0000:3b:00.0.
func isPCI(s string) bool {
	if len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') && c != ':' && c != '.' {
			return false
		}
	}
	return true
}
