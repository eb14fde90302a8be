package golden

import (
	"encoding/hex"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// A request is keyed by its req_id. A service that writes none (most
// OpenTelemetry-instrumented services carry only trace context) still has
// requests: such a request is keyed by the trace that started it, written as
// its req_id (the trace id in lowercase hex) with ReqIDFrom set to
// ReqIDFromTrace, so that routing, sampling, the event graph and the rca
// answer read one key whatever a service writes.
const (
	// ReqIDFrom says what a req_id Loom wrote was made from; absent on a
	// req_id a service wrote or one taken from another record of its request.
	ReqIDFrom = "golden.req_id_from"
	// ReqIDFromTrace: the request carries no req_id; its key is its trace.
	ReqIDFromTrace = "trace"
)

// TraceKey is the key of a request that carries no req_id: the id of its
// trace in lowercase hex, as OTLP/JSON and W3C traceparent write it.
func TraceKey(t pcommon.TraceID) string { return hex.EncodeToString(t[:]) }

// RequestKey is the key of the request a record belongs to: its req_id when
// it carries a usable one, else its trace's key. byTrace says which; key is
// empty when the record has neither.
func RequestKey(reqID string, t pcommon.TraceID) (key string, byTrace bool) {
	if UsableReqID(reqID) {
		return reqID, false
	}
	if t.IsEmpty() {
		return "", false
	}
	return TraceKey(t), true
}

// IsTraceKey reports whether id has the shape of a trace key: a valid
// trace id in lowercase hex.
func IsTraceKey(id string) bool {
	return lowerHex(id, len(pcommon.TraceID{})) && id != TraceKey(pcommon.TraceID{})
}

// KeyedByTrace reports whether a record's req_id is its trace's key, made
// by Loom for a request that carries no req_id of its own.
func KeyedByTrace(attrs pcommon.Map) bool {
	v, ok := attrs.Get(ReqIDFrom)
	return ok && v.Type() == pcommon.ValueTypeStr && v.Str() == ReqIDFromTrace
}
