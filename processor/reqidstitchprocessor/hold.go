package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

// parked is one held record, alone in a batch with its resource and scope.
type parked[T any] struct {
	data     T
	bytes    int
	deadline int64
}

// holdQueue holds records that wait for a binding, oldest first, within a
// bound on their count and bytes. Its owner holds the stitcher's mutex.
type holdQueue[T any] struct {
	items      []parked[T]
	bytes      int
	wait       int64 // how long a record may wait (ns)
	maxRecords int
	maxBytes   int
}

func newHoldQueue[T any](cfg HoldConfig) holdQueue[T] {
	return holdQueue[T]{wait: int64(cfg.Duration), maxRecords: cfg.MaxRecords, maxBytes: cfg.MaxBytes}
}

func (q *holdQueue[T]) enabled() bool { return q.wait > 0 }

// push holds data until now+wait. To stay within bounds it first pushes the
// oldest records out through pushOut; a record that can never fit is refused.
func (q *holdQueue[T]) push(data T, size int, now int64, pushOut func(T)) bool {
	if size > q.maxBytes {
		return false
	}
	for len(q.items) >= q.maxRecords || q.bytes+size > q.maxBytes {
		oldest := q.items[0]
		q.items[0] = parked[T]{}
		q.items = q.items[1:]
		q.bytes -= oldest.bytes
		pushOut(oldest.data)
	}
	q.items = append(q.items, parked[T]{data: data, bytes: size, deadline: now + q.wait})
	q.bytes += size
	return true
}

// sweep visits every held record, oldest first, and keeps those visit returns true for.
func (q *holdQueue[T]) sweep(visit func(parked[T]) bool) {
	kept := q.items[:0]
	q.bytes = 0
	for _, p := range q.items {
		if visit(p) {
			kept = append(kept, p)
			q.bytes += p.bytes
		}
	}
	clear(q.items[len(kept):])
	q.items = kept
}

func (q *holdQueue[T]) len() int { return len(q.items) }

// signal is what the generic processor needs to know about plog.Logs or ptrace.Traces.
type signal[T any] struct {
	newBatch func() T
	count    func(T) int
	size     func(T) int
	// appendTo moves every record of src to the end of dst.
	appendTo func(src, dst T)
	// stitch stitches a batch in place, offering records that wait to hold.
	stitch func(s *stitcher, batch T, now int64, hold func(T) bool)
	// restitch retries the binding of a parked record; true when it still waits.
	restitch func(s *stitcher, parked T, now int64) bool
	// release applies the causal rules to a parked record on its way out.
	release func(s *stitcher, parked T)
}

// sweepHold releases into one batch the held records that are now bound or
// have waited long enough, or all of them when flushing. The caller holds s.mu.
func sweepHold[T any](s *stitcher, q *holdQueue[T], sig signal[T], now int64, flush bool) T {
	out := sig.newBatch()
	q.sweep(func(p parked[T]) bool {
		outcome := outcomeBound
		if sig.restitch(s, p.data, now) {
			switch {
			case flush:
				outcome = outcomeShutdown
			case now >= p.deadline:
				outcome = outcomeExpired
			default:
				return true
			}
		}
		releaseHeld(s, sig, p.data, out, outcome)
		return false
	})
	return out
}

// releaseHeld sends a held record on its way: the causal rules, the count, the batch out.
func releaseHeld[T any](s *stitcher, sig signal[T], data, out T, o outcome) {
	sig.release(s, data)
	s.tally.released[o]++
	sig.appendTo(data, out)
}
