//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
)

// withoutStateStorageEnv, set to 1, runs the crash tests without the
// processors' storage keys that gateway.yaml and agent.yaml set: undecided
// and held records are then in memory only (the exporters' queues stay on
// disk), and the tests show what a SIGKILL costs.
const withoutStateStorageEnv = "LOOM_E2E_CRASH_WITHOUT_STATE_STORAGE"

// crashSeedEnv replays a run's kill schedule and ids (the seed is logged).
const crashSeedEnv = "LOOM_E2E_CRASH_SEED"

// withoutRequestState keeps reqsampling's undecided requests and
// reqidstitch's hold in memory only, as they were before they had storage.
func withoutRequestState(cfg map[string]any) {
	delete(mapAt(cfg, "processors", "reqsampling"), "storage")
	delete(mapAt(cfg, "processors", "reqidstitch/gateway"), "storage")
}

// lokiWithOutage answers every push 503 while down, as Loki's distributor does
// when too few ingesters are healthy, and otherwise hands it to loki.
type lokiWithOutage struct {
	loki    *lokiPushes
	down    atomic.Bool
	refused atomic.Int64
}

func (l *lokiWithOutage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l.down.Load() {
		l.refused.Add(1)
		http.Error(w, "at least 2 live replicas required, could only find 0", http.StatusServiceUnavailable)
		return
	}
	l.loki.ServeHTTP(w, r)
}

// crashRequest is one request of the crash test's client: log records and
// spans that share a req_id, each record identified by a key (a log's body,
// a span's id) that the sinks report back.
type crashRequest struct {
	reqID    string
	logs     plog.Logs
	traces   ptrace.Traces
	logKeys  []string
	spanKeys []string
	// logsAcked and tracesAcked: the collector answered the Export call OK.
	// The Retried ones were sent more than once, so a copy may come from the
	// client itself.
	logsAcked, tracesAcked     atomic.Bool
	logsRetried, tracesRetried atomic.Bool
}

const (
	crashSpansPerRequest = 2
	crashLogsPerRequest  = 3
)

func newCrashRequest(rng *rand.Rand, i int, now time.Time) *crashRequest {
	r := &crashRequest{reqID: fmt.Sprintf("req-%013d-c%05d", now.UnixMilli(), i)}
	var traceID pcommon.TraceID
	binary.BigEndian.PutUint64(traceID[:8], rng.Uint64())
	binary.BigEndian.PutUint64(traceID[8:], rng.Uint64())
	r.traces = ptrace.NewTraces()
	rs := r.traces.ResourceSpans().AppendEmpty()
	putCrashResource(rs.Resource())
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	var parent pcommon.SpanID
	for k := range crashSpansPerRequest {
		var spanID pcommon.SpanID
		binary.BigEndian.PutUint64(spanID[:], rng.Uint64()|1)
		span := spans.AppendEmpty()
		span.SetTraceID(traceID)
		span.SetSpanID(spanID)
		span.SetParentSpanID(parent)
		span.SetName(fmt.Sprintf("crash.stage%d", k))
		span.SetKind(ptrace.SpanKindServer)
		span.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(k) * time.Millisecond)))
		span.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(20 * time.Millisecond)))
		span.Attributes().PutStr(golden.ReqID, r.reqID)
		r.spanKeys = append(r.spanKeys, hex.EncodeToString(spanID[:]))
		parent = spanID
	}
	r.logs = plog.NewLogs()
	rl := r.logs.ResourceLogs().AppendEmpty()
	putCrashResource(rl.Resource())
	records := rl.ScopeLogs().AppendEmpty().LogRecords()
	for k := range crashLogsPerRequest {
		lr := records.AppendEmpty()
		body := fmt.Sprintf("crash-test %s log %d", r.reqID, k)
		lr.Body().SetStr(body)
		lr.SetTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(k) * time.Millisecond)))
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.SetSeverityText("INFO")
		// A req_id and no trace context, as a service that logs without
		// it writes: sent before the spans, the log waits in reqidstitch's
		// hold for its trace context, and may be held when a kill comes.
		lr.Attributes().PutStr(golden.ReqID, r.reqID)
		r.logKeys = append(r.logKeys, body)
	}
	return r
}

func putCrashResource(res pcommon.Resource) {
	res.Attributes().PutStr("service.name", "crash-client")
}

// crashClient sends requests at a steady rate and retries each Export call
// until the collector acknowledges it.
type crashClient struct {
	logs   plogotlp.GRPCClient
	traces ptraceotlp.GRPCClient
}

func newCrashClient(t *testing.T, endpoint string) *crashClient {
	t.Helper()
	// Reconnect within a fraction of a second of a restart, not gRPC's default
	// backoff of up to two minutes.
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.5, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: 2 * time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &crashClient{logs: plogotlp.NewGRPCClient(conn), traces: ptraceotlp.NewGRPCClient(conn)}
}

// send builds requests[i] with build, at the rate given and stamped with the
// time it is sent, and sends each on one of a few workers, so that a request
// retried while the collector is down does not hold back the ones after it.
// It returns when every request is acknowledged or ctx ends; the requests
// not built by then stay nil.
func (c *crashClient) send(ctx context.Context, requests []*crashRequest, perSecond int, build func(i int, now time.Time) *crashRequest) {
	const workers = 8
	queue := make(chan *crashRequest, len(requests))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r := range queue {
				// Logs first: they wait in reqidstitch's hold until their span arrives.
				c.untilAcked(ctx, &r.logsAcked, &r.logsRetried, func(ctx context.Context) error {
					_, err := c.logs.Export(ctx, plogotlp.NewExportRequestFromLogs(r.logs))
					return err
				})
				c.untilAcked(ctx, &r.tracesAcked, &r.tracesRetried, func(ctx context.Context) error {
					_, err := c.traces.Export(ctx, ptraceotlp.NewExportRequestFromTraces(r.traces))
					return err
				})
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	for i := range requests {
		select {
		case now := <-tick.C:
			requests[i] = build(i, now)
			queue <- requests[i]
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
}

func (c *crashClient) untilAcked(ctx context.Context, acked, retried *atomic.Bool, export func(context.Context) error) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			retried.Store(true)
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := export(callCtx)
		cancel()
		if err == nil {
			acked.Store(true)
			return
		}
	}
}

// received is what reached the sinks, by record key: each copy's fingerprint
// (everything a backend stores of it), so that copies can be compared.
type received map[string][]string

func (r received) add(key, fingerprint string) { r[key] = append(r[key], fingerprint) }

func (r received) copies() int {
	n := 0
	for _, copies := range r {
		n += len(copies)
	}
	return n
}

func receivedByKey(loki *lokiPushes, tempo *otlpsink.Sink) received {
	got := received{}
	got.addLokiEntries(loki)
	got.addSpans(tempo)
	return got
}

// addLokiEntries adds loki's entries by the body of the log record each was written from.
func (r received) addLokiEntries(loki *lokiPushes) {
	_, entries := loki.snapshot()
	for _, e := range entries {
		var line struct {
			Body string `json:"body"`
		}
		_ = json.Unmarshal([]byte(e.line), &line)
		metadata := make([]string, 0, len(e.metadata))
		for k, v := range e.metadata {
			metadata = append(metadata, k+"="+v)
		}
		sort.Strings(metadata)
		r.add(line.Body, fmt.Sprintf("%s %s %s %s", e.timestamp.UTC().Format(time.RFC3339Nano), e.labels, e.line, strings.Join(metadata, " ")))
	}
}

// addSpans adds the spans sink received by span id.
func (r received) addSpans(sink *otlpsink.Sink) {
	for _, td := range sink.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					r.add(span.SpanID().String(), spanFingerprint(rs.Resource(), ss.Scope(), span))
				}
			}
		}
	}
}

// addLogs adds the log records sink received by body.
func (r received) addLogs(sink *otlpsink.Sink) {
	for _, ld := range sink.Logs() {
		for _, rl := range ld.ResourceLogs().All() {
			resource := rl.Resource().Attributes().AsRaw()
			for _, sl := range rl.ScopeLogs().All() {
				scope := []any{sl.Scope().Name(), sl.Scope().Version()}
				for _, lr := range sl.LogRecords().All() {
					r.add(lr.Body().AsString(), logFingerprint(resource, scope, lr))
				}
			}
		}
	}
}

// spanFingerprint is a span with its resource and scope, attributes in key
// order (a replayed copy need not list them in the same order to be the same).
func spanFingerprint(res pcommon.Resource, scope pcommon.InstrumentationScope, span ptrace.Span) string {
	events := make([]any, 0, span.Events().Len())
	for _, e := range span.Events().All() {
		events = append(events, []any{e.Name(), e.Timestamp(), e.Attributes().AsRaw()})
	}
	links := make([]any, 0, span.Links().Len())
	for _, l := range span.Links().All() {
		links = append(links, []any{l.TraceID().String(), l.SpanID().String(), l.Attributes().AsRaw()})
	}
	b, _ := json.Marshal(map[string]any{
		"resource": res.Attributes().AsRaw(),
		"scope":    []any{scope.Name(), scope.Version()},
		"ids":      []string{span.TraceID().String(), span.SpanID().String(), span.ParentSpanID().String()},
		"name":     span.Name(),
		"kind":     span.Kind().String(),
		"time":     []any{span.StartTimestamp(), span.EndTimestamp()},
		"status":   []any{span.Status().Code().String(), span.Status().Message()},
		"attrs":    span.Attributes().AsRaw(),
		"events":   events,
		"links":    links,
	})
	return string(b)
}

// logFingerprint is a log record with its resource's attributes and its
// scope's name and version, attributes in key order.
func logFingerprint(resource map[string]any, scope []any, lr plog.LogRecord) string {
	b, _ := json.Marshal(map[string]any{
		"resource": resource,
		"scope":    scope,
		"ids":      []any{lr.TraceID().String(), lr.SpanID().String(), uint32(lr.Flags())},
		"event":    lr.EventName(),
		"time":     []any{lr.Timestamp(), lr.ObservedTimestamp()},
		"severity": []any{lr.SeverityNumber(), lr.SeverityText()},
		"body":     lr.Body().AsRaw(),
		"attrs":    lr.Attributes().AsRaw(),
	})
	return string(b)
}

// crashOutcome compares what the client was acknowledged with what reached the sinks.
type crashOutcome struct {
	records, acked, lost, duplicated, identical, duplicatedRetried int
	lostLogs, lostSpans, duplicatedLogs, duplicatedSpans           int
	resent, incompleteRequests                                     int
	lostKeys, differingCopies                                      []string
}

func compareCrash(requests []*crashRequest, got received) crashOutcome {
	var o crashOutcome
	check := func(keys []string, acked, retried bool, lostOfKind, duplicatedOfKind *int) (whole bool) {
		whole = true
		for _, key := range keys {
			o.records++
			if retried {
				o.resent++
			}
			if !acked {
				continue
			}
			o.acked++
			copies := got[key]
			if len(copies) == 0 {
				o.lost++
				*lostOfKind++
				whole = false
				if len(o.lostKeys) < 10 {
					o.lostKeys = append(o.lostKeys, key)
				}
				continue
			}
			if len(copies) > 1 {
				o.duplicated++
				*duplicatedOfKind++
				if retried {
					o.duplicatedRetried++
				}
				if slices.ContainsFunc(copies[1:], func(c string) bool { return c != copies[0] }) {
					if len(o.differingCopies) < 5 {
						o.differingCopies = append(o.differingCopies, fmt.Sprintf("%s:\n    %s", key, strings.Join(copies, "\n    ")))
					}
				} else {
					o.identical++
				}
			}
		}
		return whole
	}
	for _, r := range requests {
		if r == nil {
			continue
		}
		logsWhole := check(r.logKeys, r.logsAcked.Load(), r.logsRetried.Load(), &o.lostLogs, &o.duplicatedLogs)
		spansWhole := check(r.spanKeys, r.tracesAcked.Load(), r.tracesRetried.Load(), &o.lostSpans, &o.duplicatedSpans)
		if !logsWhole || !spansWhole {
			o.incompleteRequests++
		}
	}
	return o
}

// missingAcked counts the acknowledged records that have not reached a sink.
func missingAcked(requests []*crashRequest, got received) int {
	missing := 0
	for _, r := range requests {
		if r == nil {
			continue
		}
		for _, batch := range []struct {
			keys  []string
			acked bool
		}{{r.logKeys, r.logsAcked.Load()}, {r.spanKeys, r.tracesAcked.Load()}} {
			if !batch.acked {
				continue
			}
			for _, key := range batch.keys {
				if len(got[key]) == 0 {
					missing++
				}
			}
		}
	}
	return missing
}

// waitForDelivery polls what reached the sinks (collect) until every
// acknowledged record has arrived and nothing more came for settle (a late
// copy would be a duplicate), or until nothing at all arrived for quiet, or timeout.
func waitForDelivery(requests []*crashRequest, collect func() received, settle, quiet, timeout time.Duration) (missing int) {
	deadline := time.Now().Add(timeout)
	lastCount, lastChange := -1, time.Now()
	for {
		got := collect()
		if count := got.copies(); count != lastCount {
			lastCount, lastChange = count, time.Now()
		}
		still := time.Since(lastChange)
		missing = missingAcked(requests, got)
		if (missing == 0 && still >= settle) || still >= quiet || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// crashSeed is the seed of a crash test's kill schedule and ids: $LOOM_E2E_CRASH_SEED, else the clock.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", crashSeedEnv, err)
		}
	}
	t.Logf("crash test seed %d (%s=%d replays it)", seed, crashSeedEnv, seed)
	return seed
}

// crashPlan is what a crash test sends and when it kills: requests at
// perSecond; kills SIGKILLs, each after an uptime drawn from [minUptime,
// maxUptime); and a backend outage from the restart after kill outageFrom
// until the restart after kill outageTo.
type crashPlan struct {
	requests, perSecond  int
	kills                int
	minUptime, maxUptime time.Duration
	outageFrom, outageTo int
}

// defaultCrashPlan sends 1600 requests at 40/s, kills six times after 2-5s
// up, with the backend down across four of the kills.
var defaultCrashPlan = crashPlan{
	requests: 1600, perSecond: 40,
	kills: 6, minUptime: 2 * time.Second, maxUptime: 5 * time.Second,
	outageFrom: 1, outageTo: 5,
}

// sendWhileKilling sends plan's requests through col's OTLP receiver while
// SIGKILLing it (at moments drawn from seed) and restarting it on the same
// storage, and calls setDown(true) and setDown(false) to begin and end the
// backend's outage. It returns the requests once the client was acknowledged
// every one, and checks that a log waited in reqidstitch's hold in the last
// run, so that kills can find held records.
func sendWhileKilling(t *testing.T, col *restartableCollector, seed uint64, plan crashPlan, setDown func(bool)) []*crashRequest {
	t.Helper()
	requests := make([]*crashRequest, plan.requests)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// The client draws its ids from its own generator: the kills draw from rng meanwhile.
	idRNG := rand.New(rand.NewPCG(seed^0x5bd1e995, seed))
	buildRequest := func(i int, now time.Time) *crashRequest { return newCrashRequest(idRNG, i, now) }
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := newCrashClient(t, col.config.endpoints["receivers.otlp.protocols.grpc.endpoint"])
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		client.send(ctx, requests, plan.perSecond, buildRequest)
	}()

	for kill := 1; kill <= plan.kills; kill++ {
		uptime := plan.minUptime + time.Duration(rng.Int64N(int64(plan.maxUptime-plan.minUptime)))
		select {
		case <-time.After(uptime):
		case <-ctx.Done():
			t.Fatalf("out of time after %d kills", kill-1)
		}
		col.kill()
		t.Logf("kill %d after %s up", kill, uptime)
		col.start()
		switch kill {
		case plan.outageFrom:
			setDown(true)
			t.Logf("backend outage begins")
		case plan.outageTo:
			setDown(false)
			t.Logf("backend outage ends")
		}
	}
	<-sent
	if ctx.Err() != nil {
		t.Fatalf("the client could not deliver its requests in time\ncollector log:\n%s", col.log())
	}
	if held := scrapeCounter(t, col.current(), "otelcol_processor_reqidstitch_records_held"); held == 0 {
		t.Errorf("no log waited in reqidstitch's hold since the last restart: the test no longer covers the hold's storage")
	}
	return requests
}

// drainAfterCrashes waits until every acknowledged record reached the sinks
// from the running collector, then stops it: a graceful stop must lose nothing
// either. What it leaves in the persistent queues, a start drains.
func drainAfterCrashes(t *testing.T, col *restartableCollector, requests []*crashRequest, collect func() received) {
	t.Helper()
	missing := waitForDelivery(requests, collect, 3*time.Second, 10*time.Second, time.Minute)
	col.stop()
	if missing > 0 {
		t.Logf("%d acknowledged records not delivered yet: starting once more to drain the queues", missing)
		col.start()
		waitForDelivery(requests, collect, 3*time.Second, 10*time.Second, time.Minute)
		col.stop()
	}
}

// checkCrashOutcome logs what the kills cost and fails the test if an
// acknowledged record was lost, a record came twice with differing content,
// or the client was not acknowledged every record.
func checkCrashOutcome(t *testing.T, col *restartableCollector, requests []*crashRequest, got received, kills int) crashOutcome {
	t.Helper()
	o := compareCrash(requests, got)
	t.Logf("crash test: sent %d records in %d requests, acked %d, kills %d, lost %d, duplicated %d (identical %d; %d of them in an Export call the client retried)",
		o.records, len(requests), o.acked, kills, o.lost, o.duplicated, o.identical, o.duplicatedRetried)
	t.Logf("crash test: lost %d log records and %d spans, duplicated %d log records and %d spans; %d acked requests not whole; the client re-sent %d records; %d collector runs",
		o.lostLogs, o.lostSpans, o.duplicatedLogs, o.duplicatedSpans, o.incompleteRequests, o.resent, len(col.runs))
	if o.lost > 0 {
		t.Errorf("%d acknowledged records never reached a sink (%d requests not whole), e.g. %q", o.lost, o.incompleteRequests, o.lostKeys)
	}
	if len(o.differingCopies) > 0 {
		t.Errorf("%d records were delivered more than once with differing content (not a redelivery a backend can drop), e.g.\n  %s",
			o.duplicated-o.identical, strings.Join(o.differingCopies, "\n  "))
	}
	if o.acked != o.records {
		t.Errorf("the client was acknowledged %d of %d records", o.acked, o.records)
	}
	return o
}

// TestCrashLosesNoAcknowledgedRecord sends requests at a steady rate through
// the shipped gateway config while SIGKILLing it at random moments and
// restarting it on the same storage, with Loki down for part of the run, and
// checks that every record the client was acknowledged reaches Loki or Tempo,
// and that any record delivered twice is an identical copy (the persistent
// queue is at-least-once across a SIGKILL; Loki drops identical entries).
func TestCrashLosesNoAcknowledgedRecord(t *testing.T) {
	seed := crashSeed(t)

	loki := &lokiWithOutage{loki: &lokiPushes{t: t, tenants: map[string]int{}}}
	lokiServer := httptest.NewServer(loki)
	defer lokiServer.Close()
	tempo := startSink(t)

	storageDir := t.TempDir()
	stateStorage := func(map[string]any) {} // as gateway.yaml ships
	if os.Getenv(withoutStateStorageEnv) == "1" {
		t.Logf("%s=1: reqsampling and reqidstitch keep their pending records in memory only", withoutStateStorageEnv)
		stateStorage = withoutRequestState
	}
	col := startRestartableCollector(t, "distribution/gateway.yaml", withEdits(onLoopback(t, "file_storage/queues"), keepEveryRequest, stateStorage, func(cfg map[string]any) {
		mapAt(cfg, "extensions", "file_storage/queues")["directory"] = storageDir
		// Two seconds of traffic are undecided when a kill comes.
		mapAt(cfg, "processors", "reqsampling")["decision_wait"] = "2s"
		exporters := mapAt(cfg, "exporters")
		lokiCfg := mapAt(exporters, "loki")
		lokiCfg["endpoint"] = lokiServer.URL
		// Back off briefly, so that the queue drains within the test once Loki is back.
		lokiCfg["retry_on_failure"] = map[string]any{"initial_interval": "200ms", "max_interval": "1s"}
		tempoCfg := mapAt(exporters, "tempo")
		tempoCfg["endpoint"], tempoCfg["tls"] = tempo.GRPCEndpoint, map[string]any{"insecure": true}
		graphCfg := mapAt(exporters, "eventgraph")
		graphCfg["backend"], graphCfg["embedded"] = "embedded", map[string]any{"path": filepath.Join(storageDir, "graph.db")}
	}))

	requests := sendWhileKilling(t, col, seed, defaultCrashPlan, loki.down.Store)
	drainAfterCrashes(t, col, requests, func() received { return receivedByKey(loki.loki, tempo) })

	checkCrashOutcome(t, col, requests, receivedByKey(loki.loki, tempo), defaultCrashPlan.kills)
	t.Logf("crash test: loki refused %d pushes during its outage", loki.refused.Load())
	if t.Failed() {
		t.Logf("collector log:\n%s", col.log())
	}
}
