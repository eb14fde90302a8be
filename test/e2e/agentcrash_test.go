//go:build e2e

package e2e

import (
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loom-otel/loom/internal/otlpsink"
)

// gatewayStandIn is a TCP proxy in front of a sink that stands in for a
// gateway replica. While down it cuts every connection and refuses new ones,
// as a gateway replica being rescheduled does.
type gatewayStandIn struct {
	sink     *otlpsink.Sink
	listener net.Listener
	down     atomic.Bool
	refused  atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startGatewayStandIn(t *testing.T) *gatewayStandIn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayStandIn{sink: startSink(t), listener: ln, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		_ = ln.Close()
		g.cutConnections()
	})
	go g.serve()
	return g
}

func (g *gatewayStandIn) endpoint() string { return g.listener.Addr().String() }

func (g *gatewayStandIn) serve() {
	for {
		client, err := g.listener.Accept()
		if err != nil {
			return
		}
		if g.down.Load() {
			g.refused.Add(1)
			_ = client.Close()
			continue
		}
		backend, err := net.Dial("tcp", g.sink.GRPCEndpoint)
		if err != nil {
			_ = client.Close()
			continue
		}
		g.track(client, backend)
		go g.pipe(client, backend)
		go g.pipe(backend, client)
	}
}

func (g *gatewayStandIn) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	g.mu.Lock()
	delete(g.conns, dst)
	delete(g.conns, src)
	g.mu.Unlock()
}

func (g *gatewayStandIn) track(conns ...net.Conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range conns {
		g.conns[c] = struct{}{}
	}
}

func (g *gatewayStandIn) cutConnections() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.conns {
		_ = c.Close()
	}
}

// setDown starts or ends an outage.
func (g *gatewayStandIn) setDown(down bool) {
	g.down.Store(down)
	if down {
		g.cutConnections()
	}
}

// TestAgentCrashLosesNoAcknowledgedRecord sends requests at a steady rate
// through the shipped agent config while SIGKILLing it at random moments and
// restarting it on the same storage, with one of its two gateways down for
// part of the run, and checks that every record the client was acknowledged
// reaches a gateway, and that any record delivered twice is an identical copy.
// The logs carry a req_id and no trace context, so they wait in reqidstitch's
// hold for their spans, and a kill finds some there.
func TestAgentCrashLosesNoAcknowledgedRecord(t *testing.T) {
	// Gateway 0 is down across three of the kills.
	plan := defaultCrashPlan
	plan.requests, plan.outageTo = 1200, 4
	const gatewayWithOutage = 0
	seed := crashSeed(t)
	gateways := []*gatewayStandIn{startGatewayStandIn(t), startGatewayStandIn(t)}
	holdStorage := func(map[string]any) {} // as agent.yaml ships
	if os.Getenv(withoutStateStorageEnv) == "1" {
		t.Logf("%s=1: reqidstitch keeps its held records in memory only", withoutStateStorageEnv)
		holdStorage = func(cfg map[string]any) { delete(mapAt(cfg, "processors", "reqidstitch/agent"), "storage") }
	}
	col := startRestartableCollector(t, "distribution/agent.yaml", withEdits(onLoopback(t, "file_storage/agent"), holdStorage, func(cfg map[string]any) {
		hostnames := []any{}
		for _, g := range gateways {
			hostnames = append(hostnames, g.endpoint())
		}
		exporters := mapAt(cfg, "exporters")
		loadBalancing := mapAt(exporters, "load_balancing")
		loadBalancing["resolver"] = map[string]any{"static": map[string]any{"hostnames": hostnames}}
		// Back off briefly, so that the queue drains within the test once the gateway is back.
		retry := mapAt(loadBalancing, "retry_on_failure")
		retry["initial_interval"], retry["max_interval"] = "200ms", "1s"
		// Exporters keep their endpoints: the GPU metrics' one moves off the shared 8889 by hand.
		mapAt(exporters, "prometheus")["endpoint"] = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}))

	requests := sendWhileKilling(t, col, seed, plan, gateways[gatewayWithOutage].setDown)
	collect := func() received {
		got := received{}
		for _, g := range gateways {
			got.addLogs(g.sink)
			got.addSpans(g.sink)
		}
		return got
	}
	drainAfterCrashes(t, col, requests, collect)

	o := checkCrashOutcome(t, col, requests, collect(), plan.kills)
	perGateway := make([]int, len(gateways))
	for i, g := range gateways {
		counts := g.sink.Counts()
		perGateway[i] = counts.LogRecords + counts.Spans
	}
	t.Logf("agent crash test: records per gateway %v (%d distinct duplicates); gateway %d refused %d connections during its outage",
		perGateway, o.duplicated-o.identical, gatewayWithOutage, gateways[gatewayWithOutage].refused.Load())
	if t.Failed() {
		t.Logf("collector log:\n%s", col.log())
	}
}
