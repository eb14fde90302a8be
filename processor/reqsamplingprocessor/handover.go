package reqsamplingprocessor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/ring"
)

// handedOverBy is the resource attribute that marks the records one
// gateway hands to another, naming the sender. The receiver takes them
// whatever its own ring says, so that two gateways whose rings differ for a
// moment never pass a request back and forth; it removes the mark on
// arrival, so that it is never exported.
const handedOverBy = "loom.handed_over_by"

type handoverCause uint8

const (
	// causeArrival: records arrived at a gateway that does not own their request.
	causeArrival handoverCause = iota
	// causeMemberChange: a waiting request's owner changed with the gateway set.
	causeMemberChange
	// causeShutdown: this gateway is leaving; what waits goes to the others.
	causeShutdown
	numCauses
)

// handover keeps every request on the gateway that owns it, the one the
// agents' load_balancing exporter routes it to: it follows the gateway set
// with its resolver, forwards the records of requests another gateway owns
// to it over OTLP/gRPC, and has the shards hand their waiting requests over
// when their owner changes or this gateway shuts down. A forward that fails
// leaves its records to be decided here, counted.
type handover struct {
	s   *sampler
	cfg *HandoverConfig
	// self is this gateway as its resolver names it.
	self     string
	resolver ring.Resolver
	ring     atomic.Pointer[ring.Ring]
	// changes carries a changed ring to the sampler's goroutine, which has
	// the shards hand over what they no longer own; only the latest counts.
	changes chan *ring.Ring
	host    component.Host

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by member

	// handed counts the records handed over by cause and success, and
	// taken those taken from other gateways, for the log's account of
	// them on shutdown (the metrics are gone with the process).
	handed [numCauses][2]atomic.Int64
	taken  atomic.Int64
}

func newHandover(s *sampler) *handover {
	h := &handover{s: s, cfg: &s.cfg.Handover, self: s.cfg.Handover.self(), changes: make(chan *ring.Ring, 1), conns: map[string]*grpc.ClientConn{}}
	switch members := h.cfg.Resolver.Static.Members; {
	case s.testMembers != nil:
		h.resolver = s.testMembers
	case len(members) > 0:
		h.resolver = ring.Static(members)
	default:
		h.resolver = &ring.EndpointSlices{Service: h.cfg.Resolver.K8s.Service, Ports: h.cfg.Resolver.K8s.Ports}
	}
	return h
}

func (h *handover) start(ctx context.Context, host component.Host) error {
	h.host = host
	if err := h.resolver.Start(ctx, h.membersChanged); err != nil {
		return fmt.Errorf("handover::resolver: %w", err)
	}
	return nil
}

// shutdown stops following the gateways, once the shards handed over what
// they had to.
func (h *handover) shutdown(ctx context.Context) error {
	var failed int64
	for c := range numCauses {
		failed += h.handed[c][0].Load()
	}
	h.s.logger.Info("Records handed to the gateway that owns their request, over this gateway's run",
		zap.Int64("sent_on_arrival", h.handed[causeArrival][1].Load()),
		zap.Int64("sent_on_member_change", h.handed[causeMemberChange][1].Load()),
		zap.Int64("sent_on_shutdown", h.handed[causeShutdown][1].Load()),
		zap.Int64("failed", failed), zap.Int64("taken_from_others", h.taken.Load()))
	err := h.resolver.Shutdown(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	for member, conn := range h.conns {
		err = errors.Join(err, conn.Close())
		delete(h.conns, member)
	}
	return err
}

// membersChanged is the resolver's report of the gateway set.
func (h *handover) membersChanged(members []string) {
	r := ring.New(members)
	if old := h.ring.Swap(r); old != nil && slices.Equal(old.Members(), r.Members()) {
		return
	}
	h.s.logger.Info("The gateway set changed: requests another gateway now owns are handed over to it",
		zap.Strings("members", r.Members()), zap.Bool("self_is_member", r.Has(h.self)))
	h.mu.Lock()
	for member, conn := range h.conns {
		if !r.Has(member) {
			_ = conn.Close()
			delete(h.conns, member)
		}
	}
	h.mu.Unlock()
	select {
	case <-h.changes: // superseded
	default:
	}
	h.changes <- r
}

// leaving is the ring of the other gateways, which take over what waits
// here as this gateway shuts down; nil when there is none.
func (h *handover) leaving() *ring.Ring {
	r := h.ring.Load()
	if r == nil {
		return nil
	}
	if r = r.Without(h.self); len(r.Members()) == 0 {
		return nil
	}
	return r
}

// ownerIn is the member of r that owns the request with req_id reqID when
// it is another gateway: only requests keyed by a usable req_id are
// routed by it (the agents route by [req_id]).
func (h *handover) ownerIn(r *ring.Ring, reqID string) (string, bool) {
	if r == nil || !golden.UsableReqID(reqID) {
		return "", false
	}
	owner := r.Owner(ring.AttributeKey(golden.ReqID, reqID))
	return owner, owner != "" && owner != h.self
}

// recordOwner is the other gateway that owns a record's request, or "".
func (h *handover) recordOwner(r *ring.Ring, attrs pcommon.Map) string {
	v, ok := attrs.Get(golden.ReqID)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		return ""
	}
	owner, other := h.ownerIn(r, v.Str())
	if !other {
		return ""
	}
	return owner
}

// conn is the connection to member, made on first use.
func (h *handover) conn(member string) (*grpc.ClientConn, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if conn, ok := h.conns[member]; ok {
		return conn, nil
	}
	cfg := h.cfg.Client
	cfg.Endpoint = member
	conn, err := cfg.ToClientConn(context.Background(), h.host.GetExtensions(), h.s.set)
	if err != nil {
		return nil, fmt.Errorf("handover::client: %w", err)
	}
	h.conns[member] = conn
	return conn, nil
}

// handOver forwards the waiting requests that another member of r owns to
// it, each whole, and lets go of what the owner took: those records leave
// with the batches they came in (outcome handed_over), whose entries in
// storage are released only then. What an owner did not take waits to be
// decided here.
func (sh *shard) handOver(r *ring.Ring, cause handoverCause) {
	h := sh.s.handover
	byOwner := map[string][]*request{}
	for _, req := range sh.pending.byKey {
		if owner, other := h.ownerIn(r, req.key.reqID); other {
			byOwner[owner] = append(byOwner[owner], req)
		}
	}
	for owner, reqs := range byOwner {
		var sent [numSignals]bool
		logs, traces, undecodable := recordsOf(reqs, owner)
		sent[signalLogs] = !undecodable[signalLogs] && (logs.LogRecordCount() == 0 || logsLayout.send(h, context.Background(), owner, logs, cause) == nil)
		sent[signalTraces] = !undecodable[signalTraces] && (traces.SpanCount() == 0 || tracesLayout.send(h, context.Background(), owner, traces, cause) == nil)
		for _, req := range reqs {
			waiting := req.groups[:0]
			for _, ref := range req.groups {
				if !sent[ref.part.b.signal] {
					waiting = append(waiting, ref)
					continue
				}
				ref.part.b.groups[ref.group].verdict = verdict{handedOver: true}
				sh.settle(ref.part, 1)
			}
			if req.groups = waiting; len(waiting) == 0 {
				sh.pending.remove(req)
			}
		}
	}
	sh.publishGauges()
}

// recordsOf copies the records of requests reqs out of the batches they
// wait in, by signal, for their owner. undecodable marks a signal with a
// compacted batch that could not be decoded: its requests stay here.
func recordsOf(reqs []*request, owner string) (logs plog.Logs, traces ptrace.Traces, undecodable [numSignals]bool) {
	groups := map[*batch]map[int32]bool{}
	for _, req := range reqs {
		for _, ref := range req.groups {
			b := ref.part.b
			if groups[b] == nil {
				groups[b] = map[int32]bool{}
			}
			groups[b][ref.group] = true
		}
	}
	logs, traces = plog.NewLogs(), ptrace.NewTraces()
	for b, moving := range groups {
		ownerOf := func(i int, _ pcommon.Map) string {
			if moving[b.records[i]] {
				return owner
			}
			return ""
		}
		// Each shard decodes a compacted batch for itself: others may read it now.
		bl, bt, err := b.decoded()
		if err != nil {
			undecodable[b.signal] = true
			continue
		}
		if b.signal == signalLogs {
			logsLayout.merge(logsLayout.divert(bl, ownerOf, false)[owner], logs)
		} else {
			tracesLayout.merge(tracesLayout.divert(bt, ownerOf, false)[owner], traces)
		}
	}
	return logs, traces, undecodable
}
