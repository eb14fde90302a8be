//go:build e2e

package e2e

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
)

// onLoopback points a shipped cluster config's listeners and storage at this
// test: loopback ports (movePorts then picks free ones) and a temporary directory.
func onLoopback(t *testing.T, storage string) func(map[string]any) {
	return func(cfg map[string]any) {
		mapAt(cfg, "extensions", "health_check")["endpoint"] = "127.0.0.1:13133"
		if rca, ok := cfg["extensions"].(map[string]any)["rca"].(map[string]any); ok {
			rca["endpoint"] = "127.0.0.1:4320"
		}
		mapAt(cfg, "extensions", storage)["directory"] = t.TempDir()
		mapAt(cfg, "service")["telemetry"] = map[string]any{"metrics": map[string]any{"readers": []any{
			map[string]any{"pull": map[string]any{"exporter": map[string]any{"prometheus": map[string]any{"host": "127.0.0.1", "port": 8888}}}},
		}}}
		protocols := mapAt(cfg, "receivers", "otlp", "protocols")
		for name := range protocols {
			mapAt(protocols, name)["endpoint"] = "127.0.0.1:4317"
		}
	}
}

// TestAgentsRouteEveryRequestToOneGateway runs the shipped agent config in
// front of two replicas of the shipped gateway config and checks the two-tier
// guarantee of ARCHITECTURE.md §4: every record of one request meets on one
// gateway, and nothing is lost or duplicated on the way.
func TestAgentsRouteEveryRequestToOneGateway(t *testing.T) {
	var sinks []*otlpsink.Sink
	var gateways []string
	for range 2 {
		sink := startSink(t)
		gw := startCollector(t, "distribution/gateway.yaml", withEdits(onLoopback(t, "file_storage/queues"), func(cfg map[string]any) {
			// The backends are this test's sink; the sampler keeps everything.
			for _, pipeline := range []string{"logs", "traces"} {
				mapAt(cfg, "service", "pipelines", pipeline)["exporters"] = []any{}
			}
			exportTo(sink, "logs", "traces")(cfg)
			keepEveryRequest(cfg)
		}))
		sinks = append(sinks, sink)
		gateways = append(gateways, gw.endpoints["receivers.otlp.protocols.grpc.endpoint"])
	}
	agent := startCollector(t, "distribution/agent.yaml", withEdits(onLoopback(t, "file_storage/agent"), func(cfg map[string]any) {
		mapAt(cfg, "exporters", "load_balancing")["resolver"] = map[string]any{"static": map[string]any{"hostnames": gateways}}
	}))

	sent, truths := sendWorkload(t, agent, workload.GRPC, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
		Affected:  0.12,
		Requests:  1000,
		Seed:      17,
	})
	deadline := time.Now().Add(time.Minute)
	for {
		var logs, spans int
		for _, s := range sinks {
			logs += s.Counts().LogRecords
			spans += s.Counts().Spans
		}
		if logs >= sent.Logs && spans >= sent.Spans || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, s := range sinks {
		waitQuiet(s, 3*time.Second)
	}

	known := map[string]bool{}
	for _, tr := range truths {
		known[tr.ReqID] = true
	}
	gatewayOf := map[string]int{}
	split, workloadLogs, spans := 0, 0, 0
	record := func(gw int, reqID string) {
		if !known[reqID] {
			return
		}
		if first, seen := gatewayOf[reqID]; !seen {
			gatewayOf[reqID] = gw
		} else if first != gw {
			split++
		}
	}
	perGateway := make([]int, len(sinks))
	for gw, s := range sinks {
		for _, td := range s.Traces() {
			forEachSpan(td, func(span ptrace.Span) {
				spans++
				perGateway[gw]++
				record(gw, strAttr(span.Attributes(), golden.ReqID))
			})
		}
		for _, ld := range s.Logs() {
			forEachLog(ld, func(lr plog.LogRecord) {
				if lr.EventName() == golden.SchemaDriftEvent {
					return
				}
				workloadLogs++
				perGateway[gw]++
				record(gw, strAttr(lr.Attributes(), golden.ReqID))
			})
		}
	}
	t.Logf("records per gateway %v; %d requests", perGateway, len(gatewayOf))
	if split > 0 {
		t.Errorf("%d records reached another gateway than the rest of their request", split)
	}
	if spans != sent.Spans || workloadLogs != sent.Logs {
		t.Errorf("gateways got %d spans and %d logs, the agent was sent %d and %d", spans, workloadLogs, sent.Spans, sent.Logs)
	}
	if len(gatewayOf) != len(truths) {
		t.Errorf("%d of %d requests reached a gateway with their req_id", len(gatewayOf), len(truths))
	}
	for gw, n := range perGateway {
		if n == 0 {
			t.Errorf("gateway %d got nothing: routing does not spread requests", gw)
		}
	}
}
