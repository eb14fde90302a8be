package golden

// Record identity: the names under which exporters write a record's identity
// where a backend has no native field for it (Loki structured metadata).
const (
	// EventID is the deterministic id of a log record, span or GPU event (ARCHITECTURE.md §5).
	EventID = "event.id"
	// TraceID and SpanID carry a log record's trace context, in lowercase hex.
	TraceID = "trace_id"
	SpanID  = "span_id"
)

// IsPerRecord reports whether the attribute name is a golden field, a validation
// outcome or the event id: a value that belongs to one request or one record,
// which exporters keep queryable on every record (Loki structured metadata,
// Tempo span attributes).
func IsPerRecord(name string) bool {
	switch name {
	case ReqID, Stage, InputHash, ModelVer, EventID, ValidAttr, MissingAttr, InvalidAttr:
		return true
	}
	return IsResourceUsage(name)
}
