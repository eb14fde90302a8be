package policy

// GoldenInvalid matches requests with a record that failed golden-field
// validation (golden.valid is false).
type GoldenInvalid struct{ recordPolicy }

var _ Evaluator = GoldenInvalid{}

func (GoldenInvalid) MatchRecord(r *Record) bool { return r.Invalid }
