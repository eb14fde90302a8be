package workload

import (
	"time"

	"github.com/loom-otel/loom/internal/golden"
)

// Truth is one line (JSON object) of the ground-truth file: one per generated
// request. The fields marked "where set" are filled by the families that
// declare them (the foundry family does; the loom family leaves them empty and
// its lines out of them).
type Truth struct {
	ReqID     string   `json:"req_id"`
	Scenario  Scenario `json:"scenario"`             // the scenario that shaped this request (Healthy if unaffected)
	Failed    bool     `json:"failed"`               // did the request fail (empty output, too slow, died/timed out)
	RootCause *Cause   `json:"root_cause,omitempty"` // set when Failed
	// Silent (where set): the failure shows in no error signal of any record
	// (no error severity, set or written in the body, no error span status, no
	// error-type attribute, no exception event), only in values and timings.
	Silent bool `json:"silent,omitempty"`
	// Evidence (where set): where and how a failure shows in the records.
	Evidence  []Evidence `json:"evidence,omitempty"`
	TraceIDs  []string   `json:"trace_ids"` // hex trace ids of every trace this request produced (primary first, then async ones)
	InputHash string     `json:"input_hash,omitempty"`
	ModelVer  string     `json:"model_ver,omitempty"` // the model version that served it; empty when no model ran
	Host      string     `json:"host"`                // where the GPU work ran: the model instance's host or the celery worker's
	Spans     int        `json:"spans"`               // spans emitted for this request
	Logs      int        `json:"logs"`                // log records emitted that carry this req_id somewhere (attribute or body text)
	NoiseLogs int        `json:"noise_logs"`          // log records emitted alongside this request that carry no req_id at all
	// TracedLogs (where set): log records of this request that carry no req_id
	// but the trace context of one of its traces; NoiseLogs does not count them.
	TracedLogs int       `json:"traced_logs,omitempty"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"` // its last record, Late ones included
}

// Cause is the ground-truth root cause of a failed request.
type Cause struct {
	Kind  string `json:"kind"`  // "model_ver" (S1), "input_hash_prefix" (S2), "host" (S3), "attribute"
	Value string `json:"value"` // e.g. "llama3-8b-v2.3.2", "f7", "gpu-worker-1"
	// Attribute (where set, with Kind "attribute"): the name of the record or
	// resource attribute whose value Value is, spelled as it appears on the
	// records after the goldenfield processor's normalization, so that a
	// root-cause ranking can be scored by attribute=value.
	Attribute string `json:"attribute,omitempty"`
}

// Evidence is one place where a failure shows.
type Evidence struct {
	Kind      string `json:"kind"`                // one of the Evidence* kinds
	Stage     string `json:"stage"`               // the stage of the records that show it
	Attribute string `json:"attribute,omitempty"` // for value and missing-field evidence, as on the records after normalization
	Value     string `json:"value,omitempty"`     // for value evidence: the value the attribute takes in the failure
}

// Kinds of Evidence. The first three leave a failure silent.
const (
	EvidenceLatency        = "latency"         // the stage takes far longer than it does on healthy requests
	EvidenceValue          = "value"           // an outcome attribute takes a value healthy requests do not show
	EvidenceMissingField   = "missing_field"   // an attribute that healthy records of the stage carry is absent
	EvidenceErrorText      = "error_text"      // an error written in a log body only: the record's severity is unset
	EvidenceErrorStatus    = "error_status"    // a span with an error status and a message
	EvidenceErrorAttribute = "error_attribute" // an attribute that names the kind of error
	EvidenceException      = "exception_event" // an exception recorded as a span event
)

// CauseAttribute is the Cause kind of a root cause that is one attribute's value.
const CauseAttribute = "attribute"

// Root-cause kinds.
const (
	CauseModelVer        = golden.ModelVer
	CauseInputHashPrefix = "input_hash_prefix"
	CauseHost            = "host"
)

// causeOf is the ground truth of each incident.
func causeOf(s Scenario) *Cause {
	switch s {
	case S1:
		return &Cause{Kind: CauseModelVer, Value: upgradedModel}
	case S2:
		return &Cause{Kind: CauseInputHashPrefix, Value: slowInputPrefix}
	case S3:
		return &Cause{Kind: CauseHost, Value: celeryBadHost}
	}
	return nil
}
