// Package policy holds the reqsampling processor's sampling policies. A
// policy says whether a request must be kept; the processor keeps a request
// when any of its policies matches (each at its own percentage), else at the
// base rate.
//
// A policy looks at a request twice: once per record as the record arrives
// (MatchRecord, on the pipelines' goroutines, so it must be safe for
// concurrent use), and once per request when the request is decided
// (MatchRequest, under the processor's lock, on the goroutine of the shard
// that decides the request).
package policy // import "github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/policy"

import (
	"time"

	"github.com/loom-otel/loom/internal/failure"
)

// Evaluator is one sampling policy.
type Evaluator interface {
	// MatchRecord reports whether this record alone makes its request match.
	MatchRecord(r *Record) bool
	// MatchRequest reports whether the request matches when it is decided;
	// recordMatched says whether MatchRecord held for any of its records.
	MatchRequest(req *Request, recordMatched bool) bool
}

// Observer is a policy that learns from every decided request, kept or not.
// Observe is called under the processor's lock, after MatchRequest.
type Observer interface {
	Observe(req *Request)
}

// Record is one log record or span as policies see it: the failure model's view.
type Record = failure.Record

// Findings are what failure policies found on a request's records: reasons,
// and the rare values the value-drift policy judges when the request is decided.
type Findings struct {
	Verdict failure.Verdict
	Notes   []failure.Candidate
}

// Detector is a failure policy: a match means the request failed, and it says why.
type Detector interface {
	Evaluator
	// DetectRecord reports whether this record alone shows its request
	// failed, adding its reasons (or notes to judge later) to f.
	DetectRecord(r *Record, f *Findings) bool
}

// Request is what policies see of a request when it is decided.
type Request struct {
	// InputHash is the first input_hash found on its records ("" when none).
	InputHash string
	// Entry names the latency series of the request: the service.name and
	// stage of its entry span ("" when no span was seen).
	Entry string
	// Duration is the entry span's duration, or the time covered by all its
	// spans when no entry span was seen; 0 when the request had no span.
	Duration time.Duration
	// Spans time the request's spans when a latency policy judges their own
	// time (nil for records that arrived after their request was decided:
	// without their siblings, their own time is not known).
	Spans []failure.SpanTiming
	// Now is when the decision is made.
	Now time.Time
	// Findings are what the failure policies found on its records; request
	// policies that find a failure add their reasons. Never nil.
	Findings *Findings
}

// recordPolicy is embedded by policies that judge records only: a request
// matches when any of its records does.
type recordPolicy struct{}

func (recordPolicy) MatchRequest(_ *Request, recordMatched bool) bool { return recordMatched }

// requestPolicy is embedded by policies that judge whole requests only.
type requestPolicy struct{}

func (requestPolicy) MatchRecord(*Record) bool { return false }
