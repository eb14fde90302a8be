package reqsamplingprocessor

import (
	"time"
)

// request is one request waiting for its decision.
type request struct {
	key     requestKey
	facts   facts
	arrived time.Time
	// groups are its records, one group per batch they came in.
	groups []groupRef
	// counted and failureCounted say what the learner knows of it.
	counted, failureCounted bool
	// removed: it left the buffer out of turn (handed over) and is skipped
	// when it comes to the front.
	removed bool
}

type groupRef struct {
	part  *part
	group int32
}

// buffer holds the requests waiting for a decision, oldest first. Requests
// leave it from the front, when decision_wait has passed or early to stay
// within its bounds, or out of turn when they are handed over.
type buffer struct {
	byKey map[requestKey]*request
	queue fifo[*request]
}

func newBuffer() buffer { return buffer{byKey: map[requestKey]*request{}} }

func (q *buffer) get(key requestKey) *request { return q.byKey[key] }

// add starts waiting for a new request.
func (q *buffer) add(key requestKey, now time.Time) *request {
	r := &request{key: key, arrived: now}
	q.byKey[key] = r
	q.queue.push(r)
	return r
}

// oldest returns the request that has waited longest; nil when none waits.
func (q *buffer) oldest() *request {
	for q.queue.len() > 0 && q.queue.front().removed {
		q.queue.pop()
	}
	if q.queue.len() == 0 {
		return nil
	}
	return q.queue.front()
}

// pop removes the oldest request; one must wait.
func (q *buffer) pop() *request {
	q.oldest()
	r := q.queue.pop()
	delete(q.byKey, r.key)
	return r
}

// remove takes r out of turn.
func (q *buffer) remove(r *request) {
	delete(q.byKey, r.key)
	r.removed = true
}

func (q *buffer) len() int { return len(q.byKey) }
