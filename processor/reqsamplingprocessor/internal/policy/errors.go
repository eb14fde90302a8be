package policy

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/failure"
)

// Errors matches requests with a record that reports a failure itself
// (failure.Explicit): a span with status error or an exception, a log record
// at or above a severity (from its number, its text or its body), an error
// attribute with a value that says something failed, a GPU driver failure.
type Errors struct {
	recordPolicy
	name     string
	explicit *failure.Explicit
}

var _ Detector = (*Errors)(nil)

// NewErrors returns the errors policy called name.
func NewErrors(name string, minSeverity plog.SeverityNumber, attributes []string) *Errors {
	return &Errors{name: name, explicit: failure.NewExplicit(minSeverity, attributes)}
}

func (e *Errors) MatchRecord(r *Record) bool {
	_, ok := e.explicit.Check(r)
	return ok
}

func (e *Errors) DetectRecord(r *Record, f *Findings) bool {
	reason, ok := e.explicit.Check(r)
	if ok {
		reason.Detector = e.name
		f.Verdict.Add(reason)
	}
	return ok
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
