package policy

import "github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/learner"

// HotInput matches requests whose input_hash the learner currently holds
// hot: it, or its prefix bucket, keeps failing.
type HotInput struct {
	requestPolicy
	learner *learner.Learner
}

var _ Evaluator = (*HotInput)(nil)

// NewHotInput returns the policy reading l, which the caller teaches.
func NewHotInput(l *learner.Learner) *HotInput { return &HotInput{learner: l} }

func (h *HotInput) MatchRequest(req *Request, _ bool) bool {
	return req.InputHash != "" && h.learner.Hot(req.InputHash, req.Now)
}
