package policy

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/failure"
)

// recordDetector is a failure policy that judges records one at a time with
// a detector of the failure model, naming itself in the reasons it finds.
type recordDetector struct {
	recordPolicy
	name  string
	check func(*failure.Record) (failure.Reason, bool)
}

var _ Detector = (*recordDetector)(nil)

func (d *recordDetector) MatchRecord(r *Record) bool {
	_, ok := d.check(r)
	return ok
}

func (d *recordDetector) DetectRecord(r *Record, f *Findings) bool {
	reason, ok := d.check(r)
	if ok {
		reason.Detector = d.name
		f.Verdict.Add(reason)
	}
	return ok
}

// NewErrors returns the errors policy called name: it matches requests with
// a record that reports a failure itself (failure.Explicit): a span with
// status error or an exception, a log record at or above a severity (from its
// number, its text or its body), an error attribute with a value that says
// something failed, a status code or finish reason the semantic conventions
// call a failure, a GPU driver failure.
func NewErrors(name string, cfg failure.ExplicitConfig) Detector {
	return &recordDetector{name: name, check: failure.NewExplicit(cfg).Check}
}

// NewFailureCondition returns the failure_condition policy called name: it
// matches requests with a record for which one of its OTTL conditions holds.
func NewFailureCondition(name string, conditions *failure.Conditions) Detector {
	return &recordDetector{name: name, check: conditions.Check}
}

// ParseSeverity parses a severity name (trace, debug, info, warn, error,
// fatal; any case) into the lowest severity number of that level.
func ParseSeverity(name string) (plog.SeverityNumber, bool) {
	switch strings.ToLower(name) {
	case "trace", "debug", "info", "warn", "error", "fatal":
		return failure.LevelSeverity(name)
	}
	return 0, false
}
