package reqsamplingprocessor

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// The hand-over walks logs and spans alike: a layout says how a signal's
// pdata nests (resources, their scopes, their records) and how it is
// exported, and one walk serves both signals.

// pdataSlice is what the walk uses of a pdata slice.
type pdataSlice[T any] interface {
	Len() int
	At(i int) T
	AppendEmpty() T
	RemoveIf(f func(T) bool)
}

type resourceLevel interface {
	Resource() pcommon.Resource
	SchemaUrl() string
	SetSchemaUrl(string)
}

type scopeLevel interface {
	Scope() pcommon.InstrumentationScope
	SchemaUrl() string
	SetSchemaUrl(string)
}

type recordLevel[E any] interface {
	Attributes() pcommon.Map
	CopyTo(dest E)
}

type layout[D any, R resourceLevel, S scopeLevel, E recordLevel[E]] struct {
	signal    signal
	new       func() D
	count     func(D) int
	resources func(D) pdataSlice[R]
	scopes    func(R) pdataSlice[S]
	records   func(S) pdataSlice[E]
	// merge moves every resource of from to the end of to.
	merge  func(from, to D)
	export func(ctx context.Context, conn *grpc.ClientConn, data D) error
}

var logsLayout = &layout[plog.Logs, plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord]{
	signal:    signalLogs,
	new:       plog.NewLogs,
	count:     plog.Logs.LogRecordCount,
	resources: func(ld plog.Logs) pdataSlice[plog.ResourceLogs] { return ld.ResourceLogs() },
	scopes:    func(rl plog.ResourceLogs) pdataSlice[plog.ScopeLogs] { return rl.ScopeLogs() },
	records:   func(sl plog.ScopeLogs) pdataSlice[plog.LogRecord] { return sl.LogRecords() },
	merge:     func(from, to plog.Logs) { from.ResourceLogs().MoveAndAppendTo(to.ResourceLogs()) },
	export: func(ctx context.Context, conn *grpc.ClientConn, ld plog.Logs) error {
		_, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld))
		return err
	},
}

var tracesLayout = &layout[ptrace.Traces, ptrace.ResourceSpans, ptrace.ScopeSpans, ptrace.Span]{
	signal:    signalTraces,
	new:       ptrace.NewTraces,
	count:     ptrace.Traces.SpanCount,
	resources: func(td ptrace.Traces) pdataSlice[ptrace.ResourceSpans] { return td.ResourceSpans() },
	scopes:    func(rs ptrace.ResourceSpans) pdataSlice[ptrace.ScopeSpans] { return rs.ScopeSpans() },
	records:   func(ss ptrace.ScopeSpans) pdataSlice[ptrace.Span] { return ss.Spans() },
	merge:     func(from, to ptrace.Traces) { from.ResourceSpans().MoveAndAppendTo(to.ResourceSpans()) },
	export: func(ctx context.Context, conn *grpc.ClientConn, td ptrace.Traces) error {
		_, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		return err
	},
}

// arriving forwards the records of data whose request another gateway
// owns to it, and returns what is left to decide here: the others, the
// records of failed forwards, and everything a gateway handed over.
func (l *layout[D, R, S, E]) arriving(h *handover, ctx context.Context, data D) D {
	if l.unmark(data) {
		h.s.tel.takenOverRecords(l.signal, l.count(data))
		h.taken.Add(int64(l.count(data)))
		return data
	}
	r := h.ring.Load()
	for owner, out := range l.divert(data, func(_ int, attrs pcommon.Map) string { return h.recordOwner(r, attrs) }, true) {
		if err := l.send(h, ctx, owner, out, causeArrival); err != nil {
			l.merge(out, data)
		}
	}
	return data
}

// unmark removes the hand-over mark of data's resources and says whether
// they carried it: a gateway marks every resource it hands over, an agent none.
func (l *layout[D, R, S, E]) unmark(data D) bool {
	resources, marked := l.resources(data), false
	for i := range resources.Len() {
		marked = resources.At(i).Resource().Attributes().Remove(handedOverBy) || marked
	}
	return marked
}

// divert copies the records that ownerOf gives an owner to a D per owner,
// with their resource and scope, visiting them in scan order; with remove,
// it takes them out of data. Without, it only reads data: the shards that
// own a batch's requests copy theirs out of it at the same time.
func (l *layout[D, R, S, E]) divert(data D, ownerOf func(i int, attrs pcommon.Map) string, remove bool) map[string]D {
	out := map[string]D{}
	var diverted []bool // by scan index, with remove
	i := 0
	resources := l.resources(data)
	for ri := range resources.Len() {
		res := resources.At(ri)
		scopes := l.scopes(res)
		for si := range scopes.Len() {
			scope := scopes.At(si)
			records := l.records(scope)
			to := map[string]pdataSlice[E]{} // by owner, for this scope
			for ei := range records.Len() {
				rec := records.At(ei)
				owner := ownerOf(i, rec.Attributes())
				i++
				if remove {
					diverted = append(diverted, owner != "")
				}
				if owner == "" {
					continue
				}
				dst, ok := to[owner]
				if !ok {
					if _, ok := out[owner]; !ok {
						out[owner] = l.new()
					}
					nres := l.resources(out[owner]).AppendEmpty()
					res.Resource().CopyTo(nres.Resource())
					nres.SetSchemaUrl(res.SchemaUrl())
					nscope := l.scopes(nres).AppendEmpty()
					scope.Scope().CopyTo(nscope.Scope())
					nscope.SetSchemaUrl(scope.SchemaUrl())
					dst = l.records(nscope)
					to[owner] = dst
				}
				rec.CopyTo(dst.AppendEmpty())
			}
		}
	}
	if remove && len(out) > 0 {
		i = 0
		resources.RemoveIf(func(res R) bool {
			l.scopes(res).RemoveIf(func(scope S) bool {
				l.records(scope).RemoveIf(func(E) bool {
					i++
					return diverted[i-1]
				})
				return l.records(scope).Len() == 0
			})
			return l.scopes(res).Len() == 0
		})
	}
	return out
}

// send forwards data, marked, to owner within handover::timeout and counts
// the outcome; when the owner did not take it, data comes back unmarked,
// to be decided here.
func (l *layout[D, R, S, E]) send(h *handover, ctx context.Context, owner string, data D, cause handoverCause) error {
	resources := l.resources(data)
	for i := range resources.Len() {
		resources.At(i).Resource().Attributes().PutStr(handedOverBy, h.self)
	}
	conn, err := h.conn(owner)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.Timeout)
		err = l.export(ctx, conn, data)
		cancel()
	}
	n := l.count(data)
	h.s.tel.handedOverRecords(l.signal, cause, err == nil, n)
	h.handed[cause][b2i(err == nil)].Add(int64(n))
	if err != nil {
		l.unmark(data)
		h.s.logger.Warn("Could not hand records over to the gateway that owns their request: they are decided here",
			zap.String("owner", owner), zap.String("signal", signalNames[l.signal]), zap.Int("records", n), zap.Error(err))
	}
	return err
}
