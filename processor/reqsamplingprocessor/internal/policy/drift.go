package policy

import "github.com/loom-otel/loom/internal/failure"

// MaxNotes bounds the rare values a request keeps to judge.
const MaxNotes = 64

// ValueDrift matches requests with an outcome attribute whose value is rare
// in its place's baseline and surging now (failure.Drift). Records are
// learned and their rare values noted as they arrive; the notes are judged
// when the request is decided.
type ValueDrift struct {
	name  string
	drift *failure.Drift
}

var _ Detector = (*ValueDrift)(nil)

// NewValueDrift returns the value_drift policy called name.
func NewValueDrift(name string, drift *failure.Drift) *ValueDrift {
	return &ValueDrift{name: name, drift: drift}
}

// Drift is what the policy learns, to share with peers.
func (v *ValueDrift) Drift() *failure.Drift { return v.drift }

// MatchRecord learns the record; a record alone never matches.
func (v *ValueDrift) MatchRecord(r *Record) bool {
	v.drift.Check(r, nil, 0)
	return false
}

func (v *ValueDrift) DetectRecord(r *Record, f *Findings) bool {
	f.Notes = v.drift.Check(r, f.Notes, MaxNotes)
	return false
}

func (v *ValueDrift) MatchRequest(req *Request, _ bool) bool {
	if req.Findings == nil || len(req.Findings.Notes) == 0 {
		return false
	}
	found := false
	v.drift.Confirm(req.Findings.Notes, func(r failure.Reason) {
		r.Detector = v.name
		req.Findings.Verdict.Add(r)
		found = true
	})
	return found
}
