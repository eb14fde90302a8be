package policy

import "github.com/loom-otel/loom/internal/failure"

// FailureCondition matches requests with a record for which one of its OTTL
// conditions holds (failure.Conditions).
type FailureCondition struct {
	recordPolicy
	name       string
	conditions *failure.Conditions
}

var _ Detector = (*FailureCondition)(nil)

// NewFailureCondition returns the failure_condition policy called name.
func NewFailureCondition(name string, conditions *failure.Conditions) *FailureCondition {
	return &FailureCondition{name: name, conditions: conditions}
}

func (c *FailureCondition) MatchRecord(r *Record) bool {
	_, ok := c.conditions.Check(r)
	return ok
}

func (c *FailureCondition) DetectRecord(r *Record, f *Findings) bool {
	reason, ok := c.conditions.Check(r)
	if ok {
		reason.Detector = c.name
		f.Verdict.Add(reason)
	}
	return ok
}
