package workload

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// What every family of workloads draws from its seeded stream, and how it
// tells whether a record names its request.

// NewTraceID draws a trace id from rng.
func NewTraceID(rng *rand.Rand) trace.TraceID {
	var id trace.TraceID
	binary.BigEndian.PutUint64(id[:8], rng.Uint64())
	binary.BigEndian.PutUint64(id[8:], rng.Uint64())
	return id
}

// NewSpanID draws a span id from rng.
func NewSpanID(rng *rand.Rand) trace.SpanID {
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], rng.Uint64())
	return id
}

// Uniform draws from [lo, hi).
func Uniform(rng *rand.Rand, lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }

// Normal draws from N(mean, sd) clamped to [lo, hi].
func Normal(rng *rand.Rand, mean, sd, lo, hi float64) float64 {
	return min(hi, max(lo, mean+rng.NormFloat64()*sd))
}

// Millis is f milliseconds.
func Millis(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// Mentions reports whether a record names the request id: as an attribute
// value (under any key) or in its body text. Truth.Logs counts such records.
func Mentions(reqID, body string, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if kv.Value.AsString() == reqID {
			return true
		}
	}
	return strings.Contains(body, reqID)
}
