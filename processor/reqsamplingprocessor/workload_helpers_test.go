package reqsamplingprocessor

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor"
	"github.com/loom-otel/loom/processor/reqidstitchprocessor"
)

// goldenChain puts the real goldenfield processor (default config) in front
// of next, as the gateway pipeline does, and with stitch the real
// reqidstitch processor after it (default config without the hold: a
// request's records arrive in one batch, spans first).
type goldenChain struct {
	logs   processor.Logs
	traces processor.Traces
}

func newGoldenChain(tb testing.TB, nextLogs consumer.Logs, nextTraces consumer.Traces, stitch bool) *goldenChain {
	tb.Helper()
	if stitch {
		f := reqidstitchprocessor.NewFactory()
		cfg := f.CreateDefaultConfig().(*reqidstitchprocessor.Config)
		cfg.Hold.Duration = 0
		nextLogs, nextTraces = startProcessors(tb, f, cfg, nextLogs, nextTraces)
	}
	f := goldenfieldprocessor.NewFactory()
	logs, traces := startProcessors(tb, f, f.CreateDefaultConfig(), nextLogs, nextTraces)
	return &goldenChain{logs: logs, traces: traces}
}

func startProcessors(tb testing.TB, f processor.Factory, cfg component.Config, nextLogs consumer.Logs,
	nextTraces consumer.Traces,
) (processor.Logs, processor.Traces) {
	set := processortest.NewNopSettings(f.Type())
	logs, err := f.CreateLogs(context.Background(), set, cfg, nextLogs)
	require.NoError(tb, err)
	traces, err := f.CreateTraces(context.Background(), set, cfg, nextTraces)
	require.NoError(tb, err)
	host := componenttest.NewNopHost()
	require.NoError(tb, traces.Start(context.Background(), host))
	require.NoError(tb, logs.Start(context.Background(), host))
	tb.Cleanup(func() {
		require.NoError(tb, logs.Shutdown(context.Background()))
		require.NoError(tb, traces.Shutdown(context.Background()))
	})
	return logs, traces
}

// counter counts the records a processor kept, by req_id; it stands in for
// the exporters so that long runs keep no data. The shards call it at once;
// its counts are read once they are shut down.
type counter struct {
	mu      sync.Mutex
	byReqID map[string]int
	unkeyed int
	// failed holds the requests kept with the verdict failed, and the
	// first reason written on them.
	failed map[string]string
}

func newCounter() *counter { return &counter{byReqID: map[string]int{}, failed: map[string]string{}} }

func (c *counter) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *counter) count(attrs pcommon.Map) {
	if id := reqIDOf(attrs); id != "" {
		c.byReqID[id]++
		if v, ok := attrs.Get(failure.VerdictAttr); ok && v.Bool() {
			c.failed[id] = firstReason(attrs)
		}
	} else {
		c.unkeyed++
	}
}

// firstReason is the first failure reason on a kept record, as its kind and
// attribute.
func firstReason(attrs pcommon.Map) string {
	v, ok := attrs.Get(failure.ReasonsAttr)
	if !ok || v.Type() != pcommon.ValueTypeSlice || v.Slice().Len() == 0 || v.Slice().At(0).Type() != pcommon.ValueTypeMap {
		return ""
	}
	var parts []string
	for _, k := range []string{"kind", "attribute", "value", "stage"} {
		if f, ok := v.Slice().At(0).Map().Get(k); ok {
			parts = append(parts, f.AsString())
		}
	}
	return strings.Join(parts, " ")
}

func (c *counter) ConsumeLogs(_ context.Context, ld plog.Logs) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	forEachLog(ld, func(lr plog.LogRecord) { c.count(lr.Attributes()) })
	return nil
}

func (c *counter) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	forEachSpan(td, func(s ptrace.Span) { c.count(s.Attributes()) })
	return nil
}

// variant is one sampler configuration replayed on a workload.
type variant struct {
	name string
	cfg  *Config
	// gateways, when above 1, replays the variant as that many collectors
	// behind a req_id-routing load balancer: each its own sampler, learning
	// from the requests routed to it, all exporting to kept.
	gateways int
	// share has the gateways share what they learn, as share:: does, every
	// shareEvery of simulated time.
	share bool
	hs    []*harness
	kept  *counter
	// decisions counts the decided requests of every gateway by policy.
	decisions map[string]DecisionCount
}

// gateway is the index of the collector a req_id-routing load balancer sends
// the record to; records without one go to the first.
func gateway(attrs pcommon.Map, gateways int) int {
	id := reqIDOf(attrs)
	if id == "" {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(gateways))
}

// routedLogs and routedTraces are the part of a batch that gateway g of n receives.
func routedLogs(ld plog.Logs, g, n int) plog.Logs {
	cp := plog.NewLogs()
	ld.CopyTo(cp)
	if n > 1 {
		for _, rl := range cp.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool { return gateway(lr.Attributes(), n) != g })
			}
		}
	}
	return cp
}

func routedTraces(td ptrace.Traces, g, n int) ptrace.Traces {
	cp := ptrace.NewTraces()
	td.CopyTo(cp)
	if n > 1 {
		for _, rs := range cp.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				ss.Spans().RemoveIf(func(s ptrace.Span) bool { return gateway(s.Attributes(), n) != g })
			}
		}
	}
	return cp
}

// replay sends generated traffic through the real goldenfield processor and
// then, side by side, through every variant: each request's records arrive
// together when it ends (as workload.Run sends them), one batch per
// batchEvery of simulated time, and every variant's clock follows.
type replay struct {
	gen        workload.Source
	stitch     bool          // run reqidstitch after goldenfield
	every      time.Duration // between request ends
	batchEvery time.Duration
	truths     []workload.Truth
}

func newReplay(tb testing.TB, cfg workload.Config, every time.Duration) *replay {
	gen, err := workload.NewGenerator(cfg)
	require.NoError(tb, err)
	return &replay{gen: gen, every: every, batchEvery: 200 * time.Millisecond}
}

// run replays n requests to the variants and shuts them down.
func (r *replay) run(tb testing.TB, n int, variants []*variant) {
	goldenLogs, goldenTraces := new(consumertest.LogsSink), new(consumertest.TracesSink)
	chain := newGoldenChain(tb, goldenLogs, goldenTraces, r.stitch)
	for _, v := range variants {
		v.kept = newCounter()
		v.hs = nil
		for range max(v.gateways, 1) {
			cfg := *v.cfg
			cfg.options = slices.Clone(cfg.options)
			if v.share {
				sharingByHand(&cfg)
			}
			v.hs = append(v.hs, newHarnessTo(tb, &cfg, v.kept))
		}
	}
	var batch []*workload.Request
	flush := func(now time.Time) {
		td, ld := workload.ToPdata(batch)
		batch = batch[:0]
		require.NoError(tb, chain.traces.ConsumeTraces(context.Background(), td))
		require.NoError(tb, chain.logs.ConsumeLogs(context.Background(), ld))
		for _, v := range variants {
			for g, h := range v.hs {
				for _, ld := range goldenLogs.AllLogs() {
					require.NoError(tb, h.logs.ConsumeLogs(context.Background(), routedLogs(ld, g, len(v.hs))))
				}
				for _, td := range goldenTraces.AllTraces() {
					require.NoError(tb, h.traces.ConsumeTraces(context.Background(), routedTraces(td, g, len(v.hs))))
				}
				h.clock.set(now)
				h.tick()
			}
			if v.share && now.Sub(t0)%shareEvery < r.batchEvery {
				exchange(tb, v.hs)
			}
		}
		goldenLogs.Reset()
		goldenTraces.Reset()
	}
	next := t0.Add(r.batchEvery)
	for i := range n {
		end := t0.Add(time.Duration(i) * r.every)
		if !end.Before(next) {
			flush(next)
			next = next.Add(r.batchEvery)
		}
		req := r.gen.Next(end)
		r.truths = append(r.truths, req.Truth)
		batch = append(batch, req)
	}
	flush(next)
	// Let every request wait its decision_wait, as a running collector would.
	for _, v := range variants {
		v.decisions = map[string]DecisionCount{}
		for _, h := range v.hs {
			h.wait(v.cfg.DecisionWait)
			for policy, c := range h.heatMap().Decisions {
				sum := v.decisions[policy]
				sum.Kept += c.Kept
				sum.Dropped += c.Dropped
				v.decisions[policy] = sum
			}
			h.shutdown()
		}
	}
}

// shareEvery is share::interval's default.
const shareEvery = time.Second

// exchange hands what every gateway learned since the last exchange to the
// others, encoded and merged as over HTTP.
func exchange(tb testing.TB, hs []*harness) {
	for g, from := range hs {
		msgs := from.sampler().share.outgoing()
		for to, h := range hs {
			if to == g {
				continue
			}
			for _, m := range msgs {
				require.NoError(tb, h.sampler().share.receive(m))
			}
		}
	}
}
