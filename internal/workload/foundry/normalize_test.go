package foundry

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor"
)

// normalized sends reqs through the goldenfield processor with its default
// config and calls visit for every record that comes out, with its resource
// and record attributes.
func normalized(t *testing.T, reqs []*workload.Request, visit func(res, attrs pcommon.Map, traceID pcommon.TraceID)) {
	t.Helper()
	ctx := context.Background()
	f := goldenfieldprocessor.NewFactory()
	traces, logs := new(consumertest.TracesSink), new(consumertest.LogsSink)
	tp, err := f.CreateTraces(ctx, processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), traces)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := f.CreateLogs(ctx, processortest.NewNopSettings(f.Type()), f.CreateDefaultConfig(), logs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface {
		Start(context.Context, component.Host) error
		Shutdown(context.Context) error
	}{tp, lp} {
		if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := c.Shutdown(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	td, ld := workload.ToPdata(reqs)
	if err := tp.ConsumeTraces(ctx, td); err != nil {
		t.Fatal(err)
	}
	if err := lp.ConsumeLogs(ctx, ld); err != nil {
		t.Fatal(err)
	}
	for _, td := range traces.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					visit(rs.Resource().Attributes(), s.Attributes(), s.TraceID())
				}
			}
		}
	}
	for _, ld := range logs.AllLogs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, l := range sl.LogRecords().All() {
					visit(rl.Resource().Attributes(), l.Attributes(), l.TraceID())
				}
			}
		}
	}
}

// TestTruthReadsAfterGoldenfield: what the ground truth says is read the
// way Loom reads it, through the real goldenfield processor (default config):
// every record the truth counts as carrying the req_id leaves with that
// req_id, and every failing request's root cause attribute=value is on one of
// its records or their resources.
func TestTruthReadsAfterGoldenfield(t *testing.T) {
	reqs, g := generate(t, Config{Incidents: Incidents(), Affected: 0.5, Warmup: 100, Seed: 17}, 2500)
	byTrace := map[string]*workload.Truth{}
	for _, r := range reqs {
		for _, id := range r.Truth.TraceIDs {
			byTrace[id] = &r.Truth
		}
	}
	keyed := map[string]int{}     // records leaving with the req_id, by req_id
	hasCause := map[string]bool{} // failing requests whose root cause a record carries
	normalized(t, reqs, func(res, attrs pcommon.Map, traceID pcommon.TraceID) {
		tr := byTrace[traceID.String()]
		if v, ok := attrs.Get(golden.ReqID); ok {
			keyed[v.Str()]++
			if tr != nil && v.Str() != tr.ReqID {
				t.Fatalf("a record of trace %s (%s) leaves with req_id %s", traceID, tr.ReqID, v.Str())
			}
		}
		if tr == nil || tr.RootCause == nil {
			return
		}
		c := tr.RootCause
		for _, m := range []pcommon.Map{res, attrs} {
			if v, ok := m.Get(c.Attribute); ok && v.AsString() == c.Value {
				hasCause[tr.ReqID] = true
			}
		}
	})
	failing := 0
	for _, r := range reqs {
		tr := r.Truth
		explicit := tr.Logs
		for _, s := range r.Spans {
			if carriesID(s, tr.ReqID) {
				explicit++
			}
		}
		if keyed[tr.ReqID] != explicit {
			t.Fatalf("%s (%s): %d records leave goldenfield with its req_id; %d carry it", tr.ReqID, tr.Scenario, keyed[tr.ReqID], explicit)
		}
		if tr.Failed {
			failing++
			if !hasCause[tr.ReqID] {
				t.Fatalf("%s (%s): no record carries the root cause %s=%s after goldenfield", tr.ReqID, tr.Scenario, tr.RootCause.Attribute, tr.RootCause.Value)
			}
		}
	}
	if failing < 1000 || g.Onset() != 100 {
		t.Fatalf("%d failing requests after an onset at %d", failing, g.Onset())
	}
}

func carriesID(s workload.Span, id string) bool {
	for _, kv := range s.Attrs {
		if canonical(string(kv.Key)) == golden.ReqID && kv.Value.AsString() == id {
			return true
		}
	}
	return false
}
