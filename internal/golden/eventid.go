package golden

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// EventHash is the deterministic identity of one log record, span or GPU event
// (the value of EventID, ARCHITECTURE.md §5): the same record hashes the same
// wherever and however often it is processed, so writes keyed by it are idempotent.
//
// The identity is the emitting service instance (service.name,
// service.instance.id, host.name), the instrumentation scope name, the time, the
// trace and span ids, and the record's own text (log: severity, event name and
// body; span: name). A log record's req_id, when it arrives with one, is part
// of it too: two requests' records that are otherwise alike (a fixed message
// logged in the same millisecond, or two that redaction made alike) are two
// events, not one that the store would refuse to the second request. The
// other attributes are left out: processors add them on the way.
// The hash is SHA-256 cut to 128 bits, so crafted records cannot collide with others.
type EventHash [16]byte

// String returns the hash as 32 lowercase hex digits, the form EventID holds.
func (h EventHash) String() string { return hex.EncodeToString(h[:]) }

// ParseEventHash parses the EventID form (32 lowercase hex digits).
func ParseEventHash(s string) (EventHash, bool) {
	var h EventHash
	if !lowerHex(s, len(h)) {
		return h, false
	}
	_, err := hex.Decode(h[:], []byte(s))
	return h, err == nil
}

// lowerHex reports whether s is n bytes in lowercase hex.
func lowerHex(s string, n int) bool {
	if len(s) != 2*n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// LogEventHash returns the identity of a log record (GPU events are log records too).
func LogEventHash(res pcommon.Resource, scope pcommon.InstrumentationScope, lr plog.LogRecord) EventHash {
	ts := lr.Timestamp()
	if ts == 0 {
		ts = lr.ObservedTimestamp()
	}
	traceID, spanID := lr.TraceID(), lr.SpanID()
	return hashIdentity(func(b []byte) []byte {
		b = appendOrigin(append(b, 'L'), res, scope)
		b = binary.BigEndian.AppendUint64(b, uint64(ts))
		b = append(append(b, traceID[:]...), spanID[:]...)
		b = binary.BigEndian.AppendUint32(b, uint32(lr.SeverityNumber()))
		b = appendField(b, lr.EventName())
		b = appendValue(b, lr.Body())
		if id, ok := lr.Attributes().Get(ReqID); ok {
			b = appendValue(b, id)
		}
		return b
	})
}

// SpanEventHash returns the identity of a span.
func SpanEventHash(res pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) EventHash {
	traceID, spanID := span.TraceID(), span.SpanID()
	return hashIdentity(func(b []byte) []byte {
		b = appendOrigin(append(b, 'S'), res, scope)
		b = binary.BigEndian.AppendUint64(b, uint64(span.StartTimestamp()))
		b = append(append(b, traceID[:]...), spanID[:]...)
		return appendField(b, span.Name())
	})
}

// identityBufs holds the scratch buffers identities are serialized into before hashing.
var identityBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledIdentity keeps a huge body from pinning a huge buffer in the pool.
const maxPooledIdentity = 64 << 10

func hashIdentity(serialize func([]byte) []byte) EventHash {
	buf := identityBufs.Get().(*[]byte)
	*buf = serialize((*buf)[:0])
	sum := sha256.Sum256(*buf)
	if cap(*buf) <= maxPooledIdentity {
		identityBufs.Put(buf)
	}
	var h EventHash
	copy(h[:], sum[:])
	return h
}

func appendOrigin(b []byte, res pcommon.Resource, scope pcommon.InstrumentationScope) []byte {
	attrs := res.Attributes()
	for _, key := range [...]string{string(semconv.ServiceNameKey), string(semconv.ServiceInstanceIDKey), string(semconv.HostNameKey)} {
		v, ok := attrs.Get(key)
		if !ok {
			b = appendField(b, "")
			continue
		}
		b = appendValue(b, v)
	}
	return appendField(b, scope.Name())
}

// appendField writes s length-prefixed, so that no two field sequences serialize alike.
func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValue(b []byte, v pcommon.Value) []byte {
	b = append(b, byte(v.Type()))
	if v.Type() == pcommon.ValueTypeStr {
		return appendField(b, v.Str())
	}
	return appendField(b, v.AsString())
}
