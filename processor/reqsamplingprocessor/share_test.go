package reqsamplingprocessor

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadatatest"
)

// sharingGateway is a harness that receives its peers' pushes on an
// ephemeral loopback port and pushes to peers when the test says.
func sharingGateway(t *testing.T, peers ...string) (*harness, chan chan struct{}) {
	cfg := defaultConfig()
	cfg.Share.Server.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Share.Peers = peers
	pushes := make(chan chan struct{})
	cfg.options = append(cfg.options, withPushes(pushes))
	require.NoError(t, cfg.Validate())
	return newHarness(t, cfg), pushes
}

// sharingByHand has a gateway keep what it learns for a peer that the test
// hands it to (outgoing, receive) instead of pushing it over a socket.
func sharingByHand(cfg *Config) {
	cfg.Share.Peers = []string{"http://peer.invalid"}
	cfg.options = append(cfg.options, withPushes(make(chan chan struct{})))
}

func (h *harness) shareURL() string { return "http://" + h.sampler().share.addr.String() }

func push(pushes chan chan struct{}) {
	ack := make(chan struct{})
	pushes <- ack
	<-ack
}

// failingRequests are n requests of one input, each with an error log and
// an outcome record of one place.
func failingRequests(n int) plog.Logs {
	var recs []rec
	for i := range n {
		id := fmt.Sprintf("req-1715234890123-%06d", i)
		recs = append(recs,
			rec{reqID: id, inputHash: "a1b2c3d4", stage: "model/forward", severity: plog.SeverityNumberError},
			rec{reqID: id, stage: "postproc/filter", attrs: map[string]any{"filtered": false}})
	}
	return logsOf(recs...)
}

func TestGatewaysShareOverHTTP(t *testing.T) {
	a, _ := sharingGateway(t)
	b, pushes := sharingGateway(t, a.shareURL())
	// 12 records of a place: the first warm-up block of its baseline.
	b.send(ptrace.NewTraces(), failingRequests(12))
	b.tick()
	push(pushes)

	s := a.sampler()
	s.mu.Lock()
	snap := s.learner.Snapshot(t0)
	s.mu.Unlock()
	require.Len(t, snap.HotHashes, 1, "B's failures make the input hot on A, which saw none of its requests")
	assert.Equal(t, "a1b2c3d4", snap.HotHashes[0].InputHash)
	assert.InDelta(t, 12, snap.HotHashes[0].Failures, 0.01)

	// Every entry was merged: one block and one window of recent records
	// per place, one input.
	entries := int64(2 + 2 + 1)
	metadatatest.AssertEqualProcessorReqsamplingShareReceived(t, a.tel, []metricdata.DataPoint[int64]{
		{Value: entries, Attributes: attribute.NewSet(attribute.String("result", "accepted"))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorReqsamplingSharePushes(t, b.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("result", "sent"))},
	}, metricdatatest.IgnoreTimestamp())

	// Nothing new learned: nothing pushed.
	push(pushes)
	metadatatest.AssertEqualProcessorReqsamplingSharePushes(t, b.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("result", "sent"))},
	}, metricdatatest.IgnoreTimestamp())
}

func TestAPeerThatIsDownCostsAFailedPush(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	g, pushes := sharingGateway(t, down)
	g.send(ptrace.NewTraces(), failingRequests(3))
	g.tick()
	push(pushes)
	metadatatest.AssertEqualProcessorReqsamplingSharePushes(t, g.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("result", "failed"))},
	}, metricdatatest.IgnoreTimestamp())
	g.wait(g.sampler().cfg.DecisionWait)
	assert.Len(t, g.out().logs, 3, "the gateway samples on")
}

func TestMalformedPushesAreCountedRejections(t *testing.T) {
	g, _ := sharingGateway(t)
	post := func(body string) int {
		resp, err := http.Post(g.shareURL()+SharePath, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusBadRequest, post(`{"from":"x","entries":[`))
	assert.Equal(t, http.StatusBadRequest, post(`{"from":"x","entries":[{"policy":"nope","block":{"svc":"s","stage":"st","n":1}},`+
		`{"input":{"h":"a1","r":-1}},{"policy":"value_drift","block":{"svc":"s","stage":"st","n":1e9}},{}]}`))
	assert.Equal(t, http.StatusRequestEntityTooLarge, post(strings.Repeat(" ", g.sampler().cfg.Share.MaxBytes+1)))
	assert.Equal(t, http.StatusNoContent, post(`{"from":"x","entries":[{"input":{"h":"a1","r":1}}]}`))
	metadatatest.AssertEqualProcessorReqsamplingShareReceived(t, g.tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("result", "accepted"))},
		{Value: 1 + 4 + 1, Attributes: attribute.NewSet(attribute.String("result", "rejected"))},
	}, metricdatatest.IgnoreTimestamp())
}

// FuzzShareReceive merges arbitrary pushes: bad ones are counted
// rejections, never a panic.
func FuzzShareReceive(f *testing.F) {
	cfg := defaultConfig()
	sharingByHand(cfg)
	h := newHarness(f, cfg)
	h.send(ptrace.NewTraces(), failingRequests(16))
	h.tick()
	sh := h.sampler().share
	for _, m := range sh.outgoing() {
		f.Add(strings.Replace(string(m), `"from":"`, `"from":"peer`, 1))
	}
	f.Add(`{"entries":[{"policy":"value_drift","block":{"svc":"s","stage":"st","n":2,"attrs":[{"k":"a","p":2,"v":[{"v":"x","w":true,"c":2}]}]}}]}`)
	f.Add(`{"entries":[{"policy":"value_drift","recent":{"svc":"s","stage":"st","n":1e6,"attrs":[{"k":"a","p":5,"a":1e6,"v":[{"v":"x","w":true,"c":5}]}]}}]}`)
	f.Fuzz(func(_ *testing.T, body string) {
		_ = sh.receive([]byte(body))
	})
}

func TestPushesAreBoundedInBytes(t *testing.T) {
	cfg := defaultConfig()
	sharingByHand(cfg)
	cfg.Share.MaxBytes = minShareBytes
	h := newHarness(t, cfg)
	var recs []rec
	for i := range 5000 {
		recs = append(recs, rec{reqID: fmt.Sprintf("req-1715234890123-%06d", i), inputHash: fmt.Sprintf("%08x", i)})
	}
	h.send(ptrace.NewTraces(), logsOf(recs...))
	h.tick()
	msgs := h.sampler().share.outgoing()
	require.Greater(t, len(msgs), 1)
	total := 0
	for _, m := range msgs {
		assert.LessOrEqual(t, len(m), minShareBytes)
		total += len(m)
		require.NoError(t, h.sampler().share.receive([]byte(strings.Replace(string(m), `"from":"`, `"from":"peer`, 1))))
	}
	t.Logf("5000 input hashes: %d messages, %d bytes", len(msgs), total)
}

func TestAServerWithoutPeersKeepsNothingForThem(t *testing.T) {
	g, _ := sharingGateway(t)
	g.send(ptrace.NewTraces(), failingRequests(12))
	g.tick()
	assert.Empty(t, g.sampler().share.outgoing(), "no one to push to: no outbox")
}
