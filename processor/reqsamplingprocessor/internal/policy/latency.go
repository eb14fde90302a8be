package policy

import (
	"time"

	"github.com/loom-otel/loom/internal/failure"
)

// Latency matches requests with a record abnormally slow for its place
// (failure.Latency: per service, stage and model, learned online), with a
// span whose own time (its duration less its children's, judged when the
// request is decided and every span of it is in) is abnormal for its place,
// and requests whose entry span breaks the configured threshold.
type Latency struct {
	name    string
	latency *failure.Latency
	now     func() time.Time
}

var _ Detector = (*Latency)(nil)

// NewLatency returns the latency policy called name.
func NewLatency(name string, latency *failure.Latency, now func() time.Time) *Latency {
	return &Latency{name: name, latency: latency, now: now}
}

// MatchRecord is DetectRecord without the reasons; it learns too.
func (l *Latency) MatchRecord(r *Record) bool {
	_, ok := l.latency.Check(r, l.now())
	return ok
}

func (l *Latency) DetectRecord(r *Record, f *Findings) bool {
	reason, ok := l.latency.Check(r, l.now())
	if ok {
		reason.Detector = l.name
		f.Verdict.Add(reason)
	}
	return ok
}

func (l *Latency) MatchRequest(req *Request, recordMatched bool) bool {
	service, stage, _ := cut(req.Entry)
	reason, slow := l.latency.SlowRequest(req.Duration, service, stage)
	l.add(req, reason, slow)
	matched := recordMatched || slow
	if len(req.Spans) == 0 {
		return matched
	}
	for i, own := range failure.SelfTimes(req.Spans) {
		if own < 0 {
			continue
		}
		reason, slow := l.latency.CheckSelf(&req.Spans[i], own, req.Now)
		l.add(req, reason, slow)
		matched = matched || slow
	}
	return matched
}

// add adds a reason found on req to its findings.
func (l *Latency) add(req *Request, reason failure.Reason, found bool) {
	if found && req.Findings != nil {
		reason.Detector = l.name
		req.Findings.Verdict.Add(reason)
	}
}

// cut splits an entry "service/stage" at its first slash.
func cut(entry string) (service, stage string, ok bool) {
	for i := 0; i < len(entry); i++ {
		if entry[i] == '/' {
			return entry[:i], entry[i+1:], true
		}
	}
	return entry, "", false
}
