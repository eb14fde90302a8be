package reqsamplingprocessor

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/custody"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/policy"
)

type signal uint8

const (
	signalLogs signal = iota
	signalTraces
	numSignals
)

// requestKey identifies a request: its req_id, else its trace id.
type requestKey struct {
	reqID   string
	traceID pcommon.TraceID
}

// facts are what a request's records tell about it, merged as they arrive.
type facts struct {
	hits      uint64 // bit i: policy i matched a record
	inputHash string
	// start and end bound the request's spans (0 when it has none yet).
	start, end pcommon.Timestamp
	// entry is the earliest root span: the request's entry point.
	entry entrySpan
	// spans time the request's spans, at most maxTimedSpans, for their
	// own time (failure.SelfTimes); nil unless a policy judges it. A
	// record's own is in span (timed), so that a span costs no allocation
	// of its own.
	spans []failure.SpanTiming
	span  failure.SpanTiming
	timed bool
	// findings are what the failure policies found; nil until they find something.
	findings *policy.Findings
}

// maxTimedSpans bounds the spans of one request whose own time is judged.
const maxTimedSpans = 256

type entrySpan struct {
	service, stage string
	start, end     pcommon.Timestamp
}

func (f *facts) merge(o *facts) {
	f.hits |= o.hits
	if f.inputHash == "" {
		f.inputHash = o.inputHash
	}
	if o.start != 0 && (f.start == 0 || o.start < f.start) {
		f.start = o.start
	}
	f.end = max(f.end, o.end)
	if o.entry.start != 0 && (f.entry.start == 0 || o.entry.start < f.entry.start) {
		f.entry = o.entry
	}
	if o.timed && len(f.spans) < maxTimedSpans {
		f.spans = append(f.spans, o.span)
	}
	if room := maxTimedSpans - len(f.spans); room > 0 && len(o.spans) > 0 {
		f.spans = append(f.spans, o.spans[:min(room, len(o.spans))]...)
	}
	switch {
	case o.findings == nil:
	case f.findings == nil:
		f.findings = o.findings
	default:
		f.findings.Verdict.Merge(&o.findings.Verdict)
		for _, n := range o.findings.Notes {
			if len(f.findings.Notes) < policy.MaxNotes {
				f.findings.Notes = append(f.findings.Notes, n)
			}
		}
	}
}

// mayShowFailure: a policy matched one of the records, or they hold spans
// whose duration a request policy may judge.
func (f *facts) mayShowFailure() bool {
	return f.hits != 0 || f.findings != nil || f.end != 0
}

// duration is the entry span's, or the time covered by all spans when no
// entry span arrived.
func (f *facts) duration() (entry string, d int64) {
	if f.entry.start != 0 {
		return f.entry.service + "/" + f.entry.stage, int64(f.entry.end) - int64(f.entry.start)
	}
	return "", int64(f.end) - int64(f.start)
}

// group is the records of one request within one batch.
type group struct {
	key requestKey
	// single marks a record with neither req_id nor trace id: a request of
	// its own, decided on arrival.
	single  bool
	facts   facts
	verdict verdict
	// late is true when the request had been decided before the batch came.
	late bool
	// bytes is the estimated size of its records.
	bytes int
}

// batch is the data of one ConsumeLogs or ConsumeTraces call. It is held
// whole until every request in it is decided, then filtered and forwarded:
// no record is copied while it waits. With compact_waiting it waits encoded
// (see compact).
type batch struct {
	signal signal
	// to is the pipeline it came from, and ctx the context it came with
	// (client metadata), which its kept records are passed on with.
	to  *outlet
	ctx context.Context
	// seq is its entry in the journal; 0 without storage.
	seq    custody.Seq
	logs   plog.Logs
	traces ptrace.Traces
	// encoded holds the records instead of logs or traces while the batch
	// is compacted.
	encoded []byte
	groups  []group
	records []int32 // the group of each record, in scan order
	arrived time.Time
	// parts are its groups by the shard that owns their requests.
	parts []part
	// undecided counts the groups not decided yet; the shard that decides
	// the last one releases the batch.
	undecided atomic.Int32
}

// part is the groups of a batch whose requests one shard owns.
type part struct {
	b      *batch
	shard  int
	groups []int32
	// bytes is the estimated size of its records, which its shard counts
	// against max_bytes until it has decided all of them (undecided: owner only).
	bytes     int
	undecided int32
}

// scanner groups a batch's records by request and runs the record policies
// on them, on the goroutine of the pipeline that sent it.
type scanner struct {
	policies []compiledPolicy
	index    map[requestKey]int32
	rec      policy.Record
	// findings is the scratch the failure policies write a record's findings to.
	findings policy.Findings
	// timeSpans: a latency policy judges the spans' own time.
	timeSpans bool
}

func newScannerPool(policies []compiledPolicy) *sync.Pool {
	timeSpans := slices.ContainsFunc(policies, func(p compiledPolicy) bool {
		_, ok := p.eval.(*policy.Latency)
		return ok
	})
	return &sync.Pool{New: func() any {
		return &scanner{policies: policies, index: map[requestKey]int32{}, timeSpans: timeSpans}
	}}
}

// Estimated record sizes besides their attributes and bodies.
const (
	logOverhead       = 64
	spanOverhead      = 96
	attributeOverhead = 16
)

func (sc *scanner) scanLogs(ld plog.Logs) *batch {
	b := &batch{signal: signalLogs, logs: ld, records: make([]int32, 0, ld.LogRecordCount())}
	r := &sc.rec
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		service := serviceName(rl.Resource())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				*r = policy.Record{Attrs: lr.Attributes(), Service: service, ResourceLogs: rl, ScopeLogs: sl, LogRecord: lr}
				reqID, f, size := sc.scanRecord()
				size += logOverhead + valueSize(lr.Body())
				sc.add(b, reqID, lr.TraceID(), &f, size)
			}
		}
	}
	clear(sc.index)
	return b
}

func (sc *scanner) scanTraces(td ptrace.Traces) *batch {
	b := &batch{signal: signalTraces, traces: td, records: make([]int32, 0, td.SpanCount())}
	r := &sc.rec
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		service := serviceName(rs.Resource())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				span := spans.At(k)
				*r = policy.Record{Attrs: span.Attributes(), Service: service, IsSpan: true, ResourceSpans: rs, ScopeSpans: ss, Span: span}
				reqID, f, size := sc.scanRecord()
				f.start, f.end = span.StartTimestamp(), span.EndTimestamp()
				if span.ParentSpanID().IsEmpty() && f.start != 0 {
					f.entry = entrySpan{service: service, stage: r.Stage, start: f.start, end: f.end}
				}
				if sc.timeSpans {
					f.span = failure.SpanTiming{Span: span.SpanID(), Parent: span.ParentSpanID(), Start: f.start, End: f.end,
						Service: service, Stage: r.Stage, Name: span.Name(), Model: r.Model}
					f.timed = true
				}
				size += spanOverhead + len(span.Name()) + spanOverhead*(span.Events().Len()+span.Links().Len())
				sc.add(b, reqID, span.TraceID(), &f, size)
			}
		}
	}
	clear(sc.index)
	return b
}

// scanRecord reads the golden fields of sc.rec in one pass over its
// attributes, runs the record policies and estimates the attributes' size.
func (sc *scanner) scanRecord() (reqID string, f facts, size int) {
	r := &sc.rec
	for k, v := range r.Attrs.All() {
		size += attributeOverhead + len(k) + valueSize(v)
		if v.Type() == pcommon.ValueTypeBool && k == golden.ValidAttr {
			r.Invalid = !v.Bool()
		}
		if v.Type() != pcommon.ValueTypeStr {
			continue
		}
		switch k {
		case golden.ReqID:
			reqID = v.Str()
		case golden.Stage:
			r.Stage = v.Str()
		case golden.ModelVer:
			r.Model = v.Str()
		case golden.InputHash:
			f.inputHash = v.Str()
		}
	}
	found := &sc.findings
	for i := range sc.policies {
		p := &sc.policies[i]
		var matched bool
		if p.detector != nil {
			matched = p.detector.DetectRecord(r, found)
		} else {
			matched = p.eval.MatchRecord(r)
		}
		if matched {
			f.hits |= 1 << i
		}
	}
	if found.Verdict.Failed || len(found.Notes) > 0 {
		// Copied out: the scratch is reused for the next record.
		f.findings = &policy.Findings{Verdict: failureVerdict(found.Verdict), Notes: append([]failure.Candidate(nil), found.Notes...)}
		found.Verdict = failure.Verdict{Reasons: found.Verdict.Reasons[:0]}
		found.Notes = found.Notes[:0]
	}
	return reqID, f, size
}

// failureVerdict copies a verdict whose reasons live in reused scratch.
func failureVerdict(v failure.Verdict) failure.Verdict {
	v.Reasons = append([]failure.Reason(nil), v.Reasons...)
	return v
}

// add puts one record in its request's group.
func (sc *scanner) add(b *batch, reqID string, traceID pcommon.TraceID, f *facts, size int) {
	// A record is grouped by its req_id, else (none, or one too long to be an
	// id) by its trace id.
	var key requestKey
	switch {
	case golden.UsableReqID(reqID):
		key.reqID = reqID
	case !traceID.IsEmpty():
		key.traceID = traceID
	default:
		b.records = append(b.records, int32(len(b.groups)))
		b.groups = append(b.groups, group{single: true, facts: *f, bytes: size})
		return
	}
	gi, ok := sc.index[key]
	if !ok {
		gi = int32(len(b.groups))
		sc.index[key] = gi
		b.groups = append(b.groups, group{key: key, facts: *f, bytes: size})
	} else {
		b.groups[gi].facts.merge(f)
		b.groups[gi].bytes += size
	}
	b.records = append(b.records, gi)
}

func serviceName(res pcommon.Resource) string {
	if v, ok := res.Attributes().Get(string(semconv.ServiceNameKey)); ok {
		return v.AsString()
	}
	return ""
}

// valueSize estimates the bytes a value takes.
func valueSize(v pcommon.Value) int {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return len(v.Str())
	case pcommon.ValueTypeBytes:
		return v.Bytes().Len()
	case pcommon.ValueTypeMap:
		size := 0
		for k, e := range v.Map().All() {
			size += attributeOverhead + len(k) + valueSize(e)
		}
		return size
	case pcommon.ValueTypeSlice:
		size := 0
		s := v.Slice()
		for i := 0; i < s.Len(); i++ {
			size += attributeOverhead + valueSize(s.At(i))
		}
		return size
	}
	return 8
}

// filterLogs keeps the records keep says yes to, visiting them in scan order.
func filterLogs(ld plog.Logs, keep func(i int, attrs pcommon.Map) bool) {
	i := 0
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				i++
				return !keep(i-1, lr.Attributes())
			})
			return sl.LogRecords().Len() == 0
		})
		return rl.ScopeLogs().Len() == 0
	})
}

// filterTraces keeps the spans keep says yes to, visiting them in scan order.
func filterTraces(td ptrace.Traces, keep func(i int, attrs pcommon.Map) bool) {
	i := 0
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			ss.Spans().RemoveIf(func(span ptrace.Span) bool {
				i++
				return !keep(i-1, span.Attributes())
			})
			return ss.Spans().Len() == 0
		})
		return rs.ScopeSpans().Len() == 0
	})
}
