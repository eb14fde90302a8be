package reqsamplingprocessor

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/golang/snappy"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// compact replaces a batch's records by their OTLP encoding, compressed
// with Snappy, while it waits for its decisions: decoded records take
// several times the bytes of their encoding, and the garbage collector scans
// every pointer in them on each cycle while they wait; the encoding of a
// batch's records, which repeat their attribute names and resources,
// compresses three to four times at about a gigabyte a second. A batch that
// cannot be encoded waits as it is.
func (b *batch) compact() {
	var data []byte
	var err error
	if b.signal == signalLogs {
		data, err = (&plog.ProtoMarshaler{}).MarshalLogs(b.logs)
	} else {
		data, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(b.traces)
	}
	if err != nil {
		return
	}
	scratch := snappyScratch.Get().(*[]byte)
	*scratch = snappy.Encode((*scratch)[:cap(*scratch)], data)
	// Copied out: Snappy writes into room for the worst case, which the
	// batch would otherwise hold while it waits.
	b.encoded = bytes.Clone(*scratch)
	snappyScratch.Put(scratch)
	b.logs, b.traces = plog.Logs{}, ptrace.Traces{}
}

// snappyScratch holds the buffers Snappy encodes into and decodes into
// where the result is copied out: one per batch would be garbage at once.
var snappyScratch = sync.Pool{New: func() any { return new([]byte) }}

// decoded returns the batch's records: its own, or a decoding of its
// compacted records that the caller owns.
func (b *batch) decoded() (plog.Logs, ptrace.Traces, error) {
	if b.encoded == nil {
		return b.logs, b.traces, nil
	}
	data, err := snappy.Decode(nil, b.encoded)
	if err != nil {
		return plog.Logs{}, ptrace.Traces{}, err
	}
	return decode(b.signal, data)
}

func decode(sig signal, data []byte) (plog.Logs, ptrace.Traces, error) {
	if sig == signalLogs {
		ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data)
		return ld, ptrace.Traces{}, err
	}
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
	return plog.Logs{}, td, err
}

// expandKept decodes only the records of a compacted batch that keep says
// yes to (by scan index) back into it, and returns the scan index each
// decoded record had.
func (b *batch) expandKept(keep func(i int) bool) ([]int32, error) {
	f := filters.Get().(*wireFilter)
	defer f.release()
	f.keep = keep
	scratch := snappyScratch.Get().(*[]byte)
	defer snappyScratch.Put(scratch)
	all, err := snappy.Decode((*scratch)[:cap(*scratch)], b.encoded)
	*scratch = all
	if err == nil {
		// Decoding copies every value out of the filtered encoding, so the
		// filter's buffer goes back to its pool.
		f.out, _, err = f.filter(f.out[:0], all, 0)
	}
	if err == nil {
		b.logs, b.traces, err = decode(b.signal, f.out)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding the records that waited compacted: %w", err)
	}
	b.encoded = nil
	return f.kept, nil
}

// filters holds wire filters with their buffers, which every decided batch
// with kept records would otherwise allocate and grow anew.
var filters = sync.Pool{New: func() any { return new(wireFilter) }}

// release returns f to its pool, without the caller's keep; kept goes to
// the caller.
func (f *wireFilter) release() {
	f.keep, f.next, f.kept = nil, 0, nil
	filters.Put(f)
}

// wireFilter copies encoded OTLP logs or traces, keeping only some of their
// records, without decoding them. LogsData and TracesData nest alike: the
// resources are field 1 of the data, the scopes field 2 of a resource, the
// records field 2 of a scope.
type wireFilter struct {
	keep func(i int) bool
	// next is the scan index of the next record; kept, those of the records kept.
	next int
	kept []int32
	// scratch holds a resource's and a scope's filtered fields, reused;
	// out, the filtered data.
	scratch [2][]byte
	out     []byte
}

const scopeDepth = 2

// filter appends msg, a message at depth (0: the data, 1: a resource, 2: a
// scope), to dst with only its kept records; a resource or scope that keeps
// none is left out, as filterLogs leaves it out. Other fields are copied as
// they are.
func (f *wireFilter) filter(dst, msg []byte, depth int) ([]byte, bool, error) {
	children := protowire.Number(2)
	if depth == 0 {
		children = 1
	}
	start, keptAny := len(dst), false
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return dst, false, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return dst, false, protowire.ParseError(m)
		}
		field, value := msg[:n+m], msg[n:n+m]
		msg = msg[n+m:]
		switch {
		case num != children || typ != protowire.BytesType:
			dst = append(dst, field...)
		case depth == scopeDepth:
			i := f.next
			f.next++
			if f.keep(i) {
				dst = append(dst, field...)
				f.kept = append(f.kept, int32(i))
				keptAny = true
			}
		default:
			child, _ := protowire.ConsumeBytes(value)
			inner, kept, err := f.filter(f.scratch[depth][:0], child, depth+1)
			f.scratch[depth] = inner[:0]
			if err != nil {
				return dst, false, err
			}
			if kept {
				dst = protowire.AppendTag(dst, num, protowire.BytesType)
				dst = protowire.AppendBytes(dst, inner)
				keptAny = true
			}
		}
	}
	if !keptAny {
		return dst[:start], false, nil
	}
	return dst, true, nil
}
