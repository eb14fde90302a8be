package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"strings"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/golden"
)

// procKey names one process: GPU events and spans meet on host, container
// and pid, the pid as the process sees it (its telemetry's process.pid).
type procKey struct {
	host      string
	container string
	pid       int64
}

// gpuSpan is a recent span of a process, as GPU attribution needs it.
type gpuSpan struct {
	start, end pcommon.Timestamp
	tid        int64 // 0 when the span names no thread
	reqID      string
	trace      pcommon.TraceID
	span       pcommon.SpanID
}

// process remembers a process's recent spans, in the order they arrived.
type process struct {
	spans []gpuSpan // spans[first:] are remembered
	first int
	// latestEnd is the latest end of its spans: a span that ended more than
	// the index's window before it has left.
	latestEnd pcommon.Timestamp
	// namesThreads is set once a span of the process names its thread: from
	// then on an event on a thread belongs only to spans on that thread.
	namesThreads bool
}

// attribution is the outcome of looking for the span that covers a GPU event.
type attribution int

const (
	uncovered attribution = iota // no span covers it (yet)
	attributed
	// ambiguous: spans of several requests cover it equally well (yet): a
	// span on its own thread may still come, and a guess is never made.
	ambiguous
)

// gpuIndex attributes GPU events to the requests whose spans, on the same
// host, pid and (when both name one) thread, cover their timestamp. It holds at
// most maxProcs processes (first in, first out). A process keeps its spans
// until one of its spans ends window after them: an SDK exports a batch of
// spans at once, seconds after they ended, and a GPU event waits for its span
// as long (gpu_attribution::wait), on either side of it. At most perProc
// spans each, the oldest leaving first (counted). Its own mutex guards it: it
// is keyed by process, not by request.
type gpuIndex struct {
	mu      sync.Mutex
	procs   map[procKey]*process
	order   []procKey // ring of the keys in insertion order, for eviction
	head    int
	perProc int
	window  pcommon.Timestamp
}

func newGPUIndex(maxProcs, perProc int, window time.Duration) *gpuIndex {
	return &gpuIndex{
		procs:   make(map[procKey]*process),
		order:   make([]procKey, 0, maxProcs),
		perProc: perProc,
		window:  pcommon.Timestamp(window),
	}
}

// observe remembers a span of process k, counting an evicted process or span in t.
func (g *gpuIndex) observe(k procKey, s gpuSpan, t *tally) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.procs[k]
	if p == nil {
		p = g.add(k, t)
	}
	p.namesThreads = p.namesThreads || s.tid != 0
	p.latestEnd = max(p.latestEnd, s.end)
	for p.first < len(p.spans) && p.spans[p.first].end+g.window < p.latestEnd {
		p.first++
	}
	if over := len(p.spans) - p.first - g.perProc + 1; over > 0 {
		t.evicted[tableGPUSpans][evictCapacity] += int64(over)
		p.first += over
	}
	if p.first > 0 && p.first >= len(p.spans)/2 {
		// Moved down once half are gone: each span moves at most once on
		// average, and the array stays the size of one window's spans.
		n := copy(p.spans, p.spans[p.first:])
		clear(p.spans[n:])
		p.spans, p.first = p.spans[:n], 0
	}
	p.spans = append(p.spans, s)
}

func (g *gpuIndex) add(k procKey, t *tally) *process {
	// The table must not pin the batch the names came from.
	k.host, k.container = strings.Clone(k.host), strings.Clone(k.container)
	p := &process{}
	if len(g.order) < cap(g.order) {
		g.order = append(g.order, k)
	} else {
		delete(g.procs, g.order[g.head])
		t.evicted[tableGPUProcesses][evictCapacity]++
		g.order[g.head] = k
		g.head = (g.head + 1) % len(g.order)
	}
	g.procs[k] = p
	return p
}

// attribute finds the span covering an event at ts on thread tid (0: unknown).
// When the event and the process's spans name threads, only spans on the
// event's thread cover it. Within one request the innermost span wins; spans
// of several requests make it ambiguous.
//
// Services whose telemetry names no container.id are known by host and pid
// alone: an event of a container falls back to them, unless spans that name
// its container have been seen.
func (g *gpuIndex) attribute(k procKey, tid int64, ts pcommon.Timestamp) (gpuSpan, attribution) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.procs[k]
	if p == nil && k.container != "" {
		k.container = ""
		p = g.procs[k]
	}
	if p == nil {
		return gpuSpan{}, uncovered
	}
	sameThread := tid != 0 && p.namesThreads
	var best *gpuSpan
	outcome := uncovered
	// Spans by reference: the scan reads a few fields of thousands of
	// spans, and copying each whole span cost more than testing it.
	spans := p.spans[p.first:]
	for i := range spans {
		s := &spans[i]
		if ts < s.start || ts > s.end || sameThread && s.tid != tid {
			continue
		}
		switch {
		case outcome == uncovered:
			best, outcome = s, attributed
		case s.reqID != best.reqID:
			outcome = ambiguous
		case s.end-s.start < best.end-best.start:
			best = s
		}
	}
	if best == nil {
		return gpuSpan{}, outcome
	}
	return *best, outcome
}

// isGPUEvent reports whether a log record without ids is a GPU event to attribute.
func (s *stitcher) isGPUEvent(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord) bool {
	if s.gpu == nil {
		return false
	}
	tc := ottllog.NewTransformContext(rl, sl, lr)
	defer tc.Close()
	return matches(s.gpuEvent, tc)
}

// attributeGPUEvent gives a GPU event the req_id and trace context of the span
// that covers it on the same host, pid and thread. It returns the span's
// req_id ("" when there is none), or what the event waits for: a span that
// may still come.
func (s *stitcher) attributeGPUEvent(o origin, lr plog.LogRecord, p *pass) (string, waitFor) {
	attrs := lr.Attributes()
	// The event names the process it is about on the record; the resource is
	// the receiver's own, and names the host. Observed from the host, a
	// containerized process has two pids: its telemetry reports the one it
	// sees (process.vpid on the event).
	k := procKey{host: o.host, container: o.container, pid: intAttr(attrs, string(semconv.ProcessVpidKey))}
	if k.pid == 0 {
		k.pid = intAttr(attrs, string(semconv.ProcessPIDKey))
	}
	if k.pid == 0 {
		k.pid = o.pid
	}
	if v, ok := attrs.Get(string(semconv.HostNameKey)); ok && k.host == "" {
		k.host = v.AsString()
	}
	if v, ok := attrs.Get(string(semconv.ContainerIDKey)); ok {
		k.container = v.AsString()
	}
	if k.pid == 0 {
		return "", noWait
	}
	tid := intAttr(attrs, golden.ThreadVID)
	if tid == 0 {
		tid = intAttr(attrs, string(semconv.ThreadIDKey))
	}
	span, outcome := s.gpu.attribute(k, tid, logTime(lr))
	if outcome != attributed {
		return "", waitGPUSpan
	}
	attrs.PutStr(golden.ReqID, span.reqID)
	golden.Filled(attrs, golden.ReqID)
	lr.SetTraceID(span.trace)
	lr.SetSpanID(span.span)
	p.tally.filled[filledGPU]++
	return span.reqID, noWait
}
