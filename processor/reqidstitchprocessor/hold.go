package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/custody"
)

// parked is one held record, alone in a batch with its resource and scope.
type parked[T any] struct {
	data     T
	bytes    int
	deadline int64
	wait     time.Duration // 0: the hold's own
	// ctx is the context it came with, client its custody.ClientKey (made
	// once per call, not per record); seq its journal entry (0 without storage).
	ctx    context.Context
	client string
	seq    custody.Seq
}

// holdQueue holds records that wait for a binding, oldest first, within a
// bound on their count and bytes. Its processor's mutex guards it.
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

// fits reports whether a record of bytes can be held at all.
func (q *holdQueue[T]) fits(bytes int) bool { return bytes <= q.maxBytes }

// push holds p until now plus its own wait, else the hold's. To stay within
// bounds it first pushes the oldest records out through pushOut; a record
// that can never fit is refused.
func (q *holdQueue[T]) push(p parked[T], now int64, pushOut func(parked[T])) bool {
	if !q.fits(p.bytes) {
		return false
	}
	for len(q.items) >= q.maxRecords || q.bytes+p.bytes > q.maxBytes {
		oldest := q.items[0]
		q.items[0] = parked[T]{}
		q.items = q.items[1:]
		q.bytes -= oldest.bytes
		pushOut(oldest)
	}
	p.deadline = now + q.wait
	if p.wait > 0 {
		p.deadline = now + int64(p.wait)
	}
	q.items = append(q.items, p)
	q.bytes += p.bytes
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
	name     string
	newBatch func() T
	// marshal and unmarshal encode records with their context's client
	// metadata, as exporterhelper's persistent queue does.
	marshal   func(context.Context, T) ([]byte, error)
	unmarshal func([]byte) (context.Context, T, error)
	count     func(T) int
	size      func(T) int
	// appendTo moves every record of src to the end of dst.
	appendTo func(src, dst T)
	// admit admits an arriving batch's records and gives each its event.id,
	// before any shard is locked; it returns the identity attributes removed.
	admit func(s *stitcher, batch T, ev *eventIDs) int64
	// stitch stitches a batch in place, offering records that wait to hold.
	stitch func(s *stitcher, batch T, p *pass, hold func(T, time.Duration) bool, ev *eventIDs)
	// restitch retries the binding of held records, leaving in p.results
	// what each still waits for.
	restitch func(s *stitcher, held []parked[T], p *pass)
	// held is a held record's trace and attributes.
	held func(held T) (pcommon.TraceID, pcommon.Map)
	// applyRules applies the causal rules to a batch on its way out; ev has
	// its event ids in order, or is nil.
	applyRules func(s *stitcher, out T, ev *eventIDs)
}

// outgoing is held records passed on in one call: they came from one client
// (custody.ClientKey), and go on with the context of the first of them.
type outgoing[T any] struct {
	client string
	ctx    context.Context
	data   T
	seqs   []custody.Seq
	// stitched records are in the form they go on in (passed on before a
	// crash, or refused once by the next consumer): they go on byte for
	// byte, without meeting the rules a second time.
	stitched bool
}

// releases collects held records on their way out, by client.
type releases[T any] []outgoing[T]

// add sends a held record on its way: the count, its client's batch (where
// the causal rules meet it, in passOn).
func (r *releases[T]) add(t *tally, sig signal[T], p parked[T], o outcome) {
	t.released[o]++
	i := slices.IndexFunc(*r, func(g outgoing[T]) bool { return g.client == p.client })
	if i < 0 {
		*r = append(*r, outgoing[T]{client: p.client, ctx: p.ctx, data: sig.newBatch()})
		i = len(*r) - 1
	}
	g := &(*r)[i]
	sig.appendTo(p.data, g.data)
	if p.seq != 0 {
		g.seqs = append(g.seqs, p.seq)
	}
}

// release sends a held record on its way (releases.add); one that leaves
// unbound takes its trace's key first (Config.KeyByTrace).
func release[T any](s *stitcher, out *releases[T], t *tally, sig signal[T], p parked[T], o outcome) {
	if o != outcomeBound && s.cfg.KeyByTrace && keyByTrace(sig.held(p.data)) {
		t.filled[filledTraceKey]++
	}
	out.add(t, sig, p, o)
}

// sweepHold releases the held records that are now bound or have waited
// long enough, or all of them when flushing. What became of the records
// that waited for a binding teaches their services whether to wait (see
// services.keysByTrace). The caller holds q's mutex.
func sweepHold[T any](s *stitcher, q *holdQueue[T], sig signal[T], ps *pass, flush bool) releases[T] {
	var out releases[T]
	sig.restitch(s, q.items, ps)
	at := 0
	q.sweep(func(p parked[T]) bool {
		outcome := outcomeBound
		wait, service := ps.results[at].wait, ps.origins[at].service
		at++
		if wait != noWait {
			switch {
			case flush:
				outcome = outcomeShutdown
			case ps.now >= p.deadline:
				outcome = outcomeExpired
			default:
				return true
			}
		}
		// A record that waited for a span of its own (a GPU event) waited
		// a wait of its own; the others, for a binding: in vain when what
		// bound it was the request its own trace keys.
		if p.wait == 0 && outcome != outcomeShutdown {
			s.services.noteWaited(service, outcome == outcomeBound && !ownTraceKeyed(sig.held(p.data)))
		}
		release(s, &out, &ps.tally, sig, p, outcome)
		return false
	})
	return out
}
