package workload

import (
	"time"

	"github.com/loom-otel/loom/internal/golden"
)

// Truth is one line (JSON object) of the ground-truth file: one per generated request.
type Truth struct {
	ReqID     string    `json:"req_id"`
	Scenario  Scenario  `json:"scenario"`             // the scenario that shaped this request (Healthy if unaffected)
	Failed    bool      `json:"failed"`               // did the request fail (empty output, too slow, died/timed out)
	RootCause *Cause    `json:"root_cause,omitempty"` // set when Failed
	TraceIDs  []string  `json:"trace_ids"`            // hex trace ids of every trace this request produced (primary first, then async ones)
	InputHash string    `json:"input_hash,omitempty"`
	ModelVer  string    `json:"model_ver,omitempty"` // the model version that served it; empty when no model ran
	Host      string    `json:"host"`                // where the GPU work ran: the model instance's host or the celery worker's
	Spans     int       `json:"spans"`               // spans emitted for this request
	Logs      int       `json:"logs"`                // log records emitted that carry this req_id somewhere (attribute or body text)
	NoiseLogs int       `json:"noise_logs"`          // log records emitted alongside this request that carry no req_id at all
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
}

// Cause is the ground-truth root cause of a failed request.
type Cause struct {
	Kind  string `json:"kind"`  // "model_ver" (S1), "input_hash_prefix" (S2), "host" (S3)
	Value string `json:"value"` // e.g. "llama3-8b-v2.3.2", "f7", "gpu-worker-1"
}

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
