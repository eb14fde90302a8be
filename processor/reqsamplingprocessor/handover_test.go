package reqsamplingprocessor

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/internal/custody/custodytest"
	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/ring"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadatatest"
)

// self is the gateway under test on the ring; nothing listens there: a
// gateway never sends to itself.
const self = "127.0.0.1:1"

// members is a resolver the test changes the gateway set through.
type members struct {
	initial  []string
	onChange func([]string)
}

func (m *members) Start(_ context.Context, onChange func([]string)) error {
	m.onChange = onChange
	onChange(m.initial)
	return nil
}

func (*members) Shutdown(context.Context) error { return nil }

// otherGateway is a real OTLP/gRPC receiver standing for the gateway that
// owns some requests.
func otherGateway(t *testing.T) *otlpsink.Sink {
	sink, err := otlpsink.Start(true)
	require.NoError(t, err)
	t.Cleanup(sink.Close)
	return sink
}

// handoverHarness keeps every request it decides, with the gateway set m.
func handoverHarness(t *testing.T, m *members, storage bool) *harness {
	cfg := defaultConfig()
	cfg.BasePercentage = 100
	cfg.Handover.Self = self
	cfg.Handover.Resolver.Static.Members = []string{self} // replaced by m
	cfg.Handover.Client.TLS.Insecure = true
	cfg.options = append(cfg.options, withMembers(m))
	var h *harness
	if storage {
		cfg.Storage = &custodytest.ID
		id := component.MustNewIDWithName(metadata.Type.String(), "handover")
		logSink, traceSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
		h = newHarnessOn(t, cfg, custodytest.FileStorage(t, t.TempDir()), id, logSink, traceSink)
		h.logSink, h.traceSink = logSink, traceSink
	} else {
		h = newHarness(t, cfg)
	}
	awaitHandOver(h)
	return h
}

// awaitHandOver returns once the shards have handed over by the last
// gateway set the resolver reported: the deciding goroutine orders one
// thing at a time, so a tick after it took the set comes after the hand-over.
func awaitHandOver(h *harness) {
	for len(h.sampler().handover.changes) > 0 {
		h.tick()
	}
	h.tick()
}

// reqIDsOwnedBy returns n req_ids that r routes to owner.
func reqIDsOwnedBy(r *ring.Ring, owner string, n int) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprintf("req-1715234890123-%06d", i)
		if r.Owner(ring.AttributeKey(golden.ReqID, id)) == owner {
			ids = append(ids, id)
		}
	}
	return ids
}

// requestsOf is a log record and a span of each request.
func requestsOf(ids []string) (ptrace.Traces, plog.Logs) {
	var recs []rec
	for _, id := range ids {
		recs = append(recs, rec{reqID: id, service: "api", root: true, end: time.Millisecond})
	}
	return tracesOf(recs...), logsOf(recs...)
}

// received counts, by req_id, the records the other gateway received, and
// checks each carries the mark naming the sender.
func received(t *testing.T, sink *otlpsink.Sink) map[string]int {
	got := map[string]int{}
	for _, ld := range sink.Logs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			mark, _ := ld.ResourceLogs().At(i).Resource().Attributes().Get(handedOverBy)
			assert.Equal(t, self, mark.AsString())
		}
		forEachLog(ld, func(lr plog.LogRecord) { got[reqIDOf(lr.Attributes())]++ })
	}
	for _, td := range sink.Traces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			mark, _ := td.ResourceSpans().At(i).Resource().Attributes().Get(handedOverBy)
			assert.Equal(t, self, mark.AsString())
		}
		forEachSpan(td, func(s ptrace.Span) { got[reqIDOf(s.Attributes())]++ })
	}
	return got
}

func handedOver(cause, result string, logs, spans int64) []metricdata.DataPoint[int64] {
	point := func(signal string, n int64) metricdata.DataPoint[int64] {
		return metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("signal", signal),
			attribute.String("cause", cause), attribute.String("result", result))}
	}
	return []metricdata.DataPoint[int64]{point("logs", logs), point("traces", spans)}
}

func TestRecordsOfRequestsAnotherGatewayOwnsGoToIt(t *testing.T) {
	other := otherGateway(t)
	set := []string{self, other.GRPCEndpoint}
	h := handoverHarness(t, &members{initial: set}, false)
	r := ring.New(set)
	mine, theirs := reqIDsOwnedBy(r, self, 5), reqIDsOwnedBy(r, other.GRPCEndpoint, 5)
	td, ld := requestsOf(append(append([]string(nil), mine...), theirs...))
	h.send(td, ld)

	got := received(t, other)
	h.wait(time.Minute)
	o := h.out()
	for _, id := range theirs {
		assert.Equal(t, 2, got[id], "%s: its owner got its log and span when they arrived", id)
		assert.Zero(t, o.records(id), "%s: not decided here", id)
	}
	for _, id := range mine {
		assert.Zero(t, got[id], id)
		assert.Equal(t, 2, o.records(id), "%s: decided here", id)
	}
	metadatatest.AssertEqualProcessorReqsamplingHandedOverRecords(t, h.tel, handedOver("arrival", "sent", 5, 5), metricdatatest.IgnoreTimestamp())
}

// goneGateway is the address of a gateway that no longer listens.
func goneGateway(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	return ln.Addr().String()
}

// What an owner does not take (it is gone) is decided here, as without the
// hand-over, whether it arrived for that owner or waited here when that
// gateway became its owner.
func TestRecordsTheOwnerDidNotTakeAreDecidedHere(t *testing.T) {
	for _, cause := range []string{"arrival", "member_change"} {
		t.Run(cause, func(t *testing.T) {
			gone := goneGateway(t)
			set := []string{self, gone}
			m := &members{initial: set}
			if cause == "member_change" {
				m.initial = []string{self}
			}
			h := handoverHarness(t, m, true)
			theirs := reqIDsOwnedBy(ring.New(set), gone, 3)
			h.send(requestsOf(theirs))
			if cause == "member_change" {
				m.onChange(set)
				awaitHandOver(h)
			}
			h.wait(time.Minute)
			for _, id := range theirs {
				assert.Equal(t, 2, h.out().records(id), "%s: decided here, not lost", id)
			}
			metadatatest.AssertEqualProcessorReqsamplingHandedOverRecords(t, h.tel, handedOver(cause, "failed", 3, 3), metricdatatest.IgnoreTimestamp())
		})
	}
}

// Two gateways whose rings differ for a moment would pass a request back
// and forth: what a gateway hands over is taken where it lands, unmarked.
func TestHandedOverRecordsAreTakenWhereTheyLand(t *testing.T) {
	other := otherGateway(t)
	set := []string{self, other.GRPCEndpoint}
	h := handoverHarness(t, &members{initial: set}, false)
	theirs := reqIDsOwnedBy(ring.New(set), other.GRPCEndpoint, 3)
	td, ld := requestsOf(theirs)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(handedOverBy, other.GRPCEndpoint)
	ld.ResourceLogs().At(0).Resource().Attributes().PutStr(handedOverBy, other.GRPCEndpoint)
	h.send(td, ld)
	h.wait(time.Minute)
	assert.Zero(t, other.Counts().LogRecords+other.Counts().Spans)
	for _, id := range theirs {
		assert.Equal(t, 2, h.out().records(id), id)
	}
	for _, ld := range h.logSink.AllLogs() {
		_, marked := ld.ResourceLogs().At(0).Resource().Attributes().Get(handedOverBy)
		assert.False(t, marked, "the mark is never exported")
	}
	for _, td := range h.traceSink.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			_, marked := td.ResourceSpans().At(i).Resource().Attributes().Get(handedOverBy)
			assert.False(t, marked, "the mark is never exported")
		}
	}
}

// When the gateway set changes, the waiting requests whose owner changed
// go to it whole, and leave this gateway's storage only once it took them.
func TestWaitingRequestsFollowTheirOwnerWhenTheSetChanges(t *testing.T) {
	other := otherGateway(t)
	m := &members{initial: []string{self}}
	h := handoverHarness(t, m, true)
	set := []string{self, other.GRPCEndpoint}
	mine, theirs := reqIDsOwnedBy(ring.New(set), self, 4), reqIDsOwnedBy(ring.New(set), other.GRPCEndpoint, 4)
	h.send(requestsOf(append(append([]string(nil), mine...), theirs...)))
	h.tick()
	require.Zero(t, other.Counts().LogRecords+other.Counts().Spans, "this gateway owned them all")

	m.onChange(set)
	_, err := other.WaitFor(context.Background(), 10*time.Second, 0, func(c otlpsink.Counts) bool { return c.LogRecords+c.Spans == 8 })
	require.NoError(t, err)
	got := received(t, other)
	h.wait(time.Minute)
	o := h.out()
	for _, id := range theirs {
		assert.Equal(t, 2, got[id], id)
		assert.Zero(t, o.records(id), id)
	}
	for _, id := range mine {
		assert.Equal(t, 2, o.records(id), id)
	}
	metadatatest.AssertEqualProcessorReqsamplingHandedOverRecords(t, h.tel, handedOver("member_change", "sent", 4, 4), metricdatatest.IgnoreTimestamp())
	entries, err := h.sampler().journal.Replay(context.Background())
	require.NoError(t, err)
	assert.Empty(t, entries, "every batch left storage: kept here or taken by its owner")
}

// A gateway that shuts down hands what waits to the others instead of
// deciding it early.
func TestAGatewayShuttingDownHandsOverWhatWaits(t *testing.T) {
	other := otherGateway(t)
	set := []string{self, other.GRPCEndpoint}
	h := handoverHarness(t, &members{initial: set}, false)
	mine := reqIDsOwnedBy(ring.New(set), self, 4)
	h.send(requestsOf(mine))
	h.tick()
	h.shutdown()
	got := received(t, other)
	for _, id := range mine {
		assert.Equal(t, 2, got[id], id)
		assert.Zero(t, h.out().records(id), id)
	}
	metadatatest.AssertEqualProcessorReqsamplingHandedOverRecords(t, h.tel, handedOver("shutdown", "sent", 4, 4), metricdatatest.IgnoreTimestamp())
}
