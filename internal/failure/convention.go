package failure

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// side is the end of a call a record speaks for: the conventions judge the
// same status code differently for the caller and the callee.
type side uint8

const (
	// server is the callee: server and consumer spans, spans of no stated
	// kind, and log records (a service's own lines speak for its handling).
	server side = iota
	// client is the caller: client and producer spans.
	client
)

func sideOf(r *Record) side {
	if r.IsSpan {
		switch r.Span.Kind() {
		case ptrace.SpanKindClient, ptrace.SpanKindProducer:
			return client
		}
	}
	return server
}

// convention is one of the OpenTelemetry semantic conventions' rules for an
// attribute whose value says the operation failed, even where the span's
// status was left unset (instrumentations differ on setting it, and log
// records have none).
type convention struct {
	attribute string
	fails     func(v pcommon.Value, at side) bool
}

// conventions is the table, in the order the rules are tried.
var conventions = []convention{
	// HTTP: a 5xx fails on both sides; a 4xx fails the client only (the
	// server answered a bad request correctly).
	{"http.response.status_code", httpStatusFails},
	{"http.status_code", httpStatusFails}, // before semantic conventions 1.21
	// gRPC: every code but OK fails a client; a server fails on the codes
	// that are its own fault.
	{"rpc.grpc.status_code", grpcStatusFails},
	{"rpc.response.status_code", grpcStatusFails},
	{"rpc.connect_rpc.error_code", grpcStatusFails},
	// Databases: the code is recorded when the operation failed; SQLSTATE
	// classes 00 (success), 01 (warning) and 02 (no data) did not.
	{"db.response.status_code", dbStatusFails},
	// Spans translated from Zipkin or Jaeger keep their status as attributes.
	{"otel.status_code", func(v pcommon.Value, _ side) bool { return strings.EqualFold(v.AsString(), "ERROR") }},
}

// exceptionEvents are the event names the conventions record a failure
// with: on a span, or as a log record's event name.
var exceptionEvents = []string{"exception", "gen_ai.client.operation.exception"}

// finishReasonsAttr lists why a generation stopped (a string, or a list of
// one per choice): the GenAI conventions' outcome of a model call.
const finishReasonsAttr = "gen_ai.response.finish_reasons"

// DefaultFailureFinishReasons are the finish reasons that mean the model
// call failed rather than ended.
var DefaultFailureFinishReasons = []string{"error"}

func isExceptionEvent(name string) bool {
	for _, e := range exceptionEvents {
		if name == e {
			return true
		}
	}
	return false
}

// conventionFailure returns the first rule of the table that r's attributes
// break, as a reason.
func (e *Explicit) conventionFailure(r *Record, at Reason) (Reason, bool) {
	s := sideOf(r)
	for _, c := range conventions {
		if v, ok := r.Attrs.Get(c.attribute); ok && c.fails(v, s) {
			at.Kind, at.Attribute, at.Value = KindAttribute, c.attribute, v.AsString()
			return at, true
		}
	}
	if v, ok := r.Attrs.Get(finishReasonsAttr); ok {
		if reason, ok := e.failedFinish(v); ok {
			at.Kind, at.Attribute, at.Value = KindAttribute, finishReasonsAttr, reason
			return at, true
		}
	}
	return Reason{}, false
}

// failedFinish returns the first finish reason of v that is a failure.
func (e *Explicit) failedFinish(v pcommon.Value) (string, bool) {
	if v.Type() == pcommon.ValueTypeSlice {
		for i := 0; i < v.Slice().Len(); i++ {
			if reason, ok := e.failedFinish(v.Slice().At(i)); ok {
				return reason, true
			}
		}
		return "", false
	}
	if v.Type() != pcommon.ValueTypeStr {
		return "", false
	}
	for _, f := range e.failureFinishReasons {
		if strings.EqualFold(v.Str(), f) {
			return v.Str(), true
		}
	}
	return "", false
}

// statusCode reads a status code written as an integer or as its digits.
func statusCode(v pcommon.Value) (int64, bool) {
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int(), true
	case pcommon.ValueTypeDouble:
		return int64(v.Double()), v.Double() == float64(int64(v.Double()))
	case pcommon.ValueTypeStr:
		n, err := strconv.ParseInt(strings.TrimSpace(v.Str()), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func httpStatusFails(v pcommon.Value, at side) bool {
	code, ok := statusCode(v)
	if !ok {
		return false
	}
	return code >= 500 && code <= 599 || at == client && code >= 400 && code <= 499
}

// grpcCodes are gRPC's status codes by name, as rpc.response.status_code
// and Connect's error codes spell them (any case, Connect's in lower case).
var grpcCodes = map[string]int64{
	"ok": 0, "cancelled": 1, "canceled": 1, "unknown": 2, "invalid_argument": 3, "deadline_exceeded": 4,
	"not_found": 5, "already_exists": 6, "permission_denied": 7, "resource_exhausted": 8,
	"failed_precondition": 9, "aborted": 10, "out_of_range": 11, "unimplemented": 12, "internal": 13,
	"unavailable": 14, "data_loss": 15, "unauthenticated": 16,
}

// grpcServerFaults are the codes that fail a server span: UNKNOWN,
// DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS.
var grpcServerFaults = [17]bool{2: true, 4: true, 12: true, 13: true, 14: true, 15: true}

func grpcStatusFails(v pcommon.Value, at side) bool {
	code, ok := statusCode(v)
	if !ok {
		code, ok = grpcCodes[strings.ToLower(strings.TrimSpace(v.AsString()))]
	}
	if !ok || code <= 0 || code > 16 {
		return false
	}
	return at == client || grpcServerFaults[code]
}

func dbStatusFails(v pcommon.Value, at side) bool {
	if s := strings.TrimSpace(v.AsString()); v.Type() == pcommon.ValueTypeStr && len(s) == 5 && isSQLState(s) {
		switch s[:2] {
		case "00", "01", "02":
			return false
		}
		return true
	}
	if code, ok := statusCode(v); ok {
		if code >= 100 && code <= 599 {
			// A database that answers over HTTP records the HTTP status.
			return httpStatusFails(v, at)
		}
		return code != 0 // a database's own error number
	}
	return reportsFailure(v)
}

func isSQLState(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}
