package foundry

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loom-otel/loom/internal/workload"
)

// incidentRun is one incident's traffic alone, split at the onset.
type incidentRun struct {
	sc               workload.Scenario
	g                *Generator
	failing, healthy []*workload.Request // after the onset
}

const incidentAffected = 0.2

func runIncident(t *testing.T, sc workload.Scenario) incidentRun {
	t.Helper()
	reqs, g := generate(t, Config{Incidents: []workload.Scenario{workload.Healthy, sc}, Affected: incidentAffected, Seed: 21}, 5000)
	run := incidentRun{sc: sc, g: g}
	for i, r := range reqs {
		tr := r.Truth
		if tr.Failed != (tr.Scenario == sc) || tr.Scenario != sc && tr.Scenario != workload.Healthy {
			t.Fatalf("request %d: truth %+v in a %s run", i, tr, sc)
		}
		switch {
		case i < g.Onset() && tr.Failed:
			t.Fatalf("request %d failed before the onset at %d", i, g.Onset())
		case i < g.Onset():
		case tr.Failed:
			run.failing = append(run.failing, r)
		default:
			run.healthy = append(run.healthy, r)
		}
	}
	if g.Onset() != 1000 {
		t.Fatalf("onset at request %d, want the default 20%% of 5000", g.Onset())
	}
	after := len(run.failing) + len(run.healthy)
	if got := float64(len(run.failing)) / float64(after); math.Abs(got-incidentAffected) > 0.03 {
		t.Fatalf("%s hits %.3f of the requests after the onset, want ~%.2f", sc, got, incidentAffected)
	}
	return run
}

// wantCause is the root cause of each incident: attribute=value as on the
// records after normalization.
func wantCause(g *Generator, sc workload.Scenario) (string, string) {
	t := g.topo
	switch sc {
	case TokPool:
		return "service.instance.id", t.tok[1].Instance
	case FieldDrop:
		return "model_ver", phiUpgraded
	case StaleTemplate:
		return "orch.template", staleTemplate
	case BlackImages:
		return "img.vae_dtype", blackDType
	case LoraCold:
		return "lora.adapter_id", coldAdapter
	case GPUOOM:
		return "accel.uuid", t.mixtral[3].gpu
	case LateWrite:
		return "store.shard", readOnlyShard
	}
	return "service.instance.id", t.mixtral[4].svc.Instance
}

// TestIncidents holds every incident to its shape: its onset and share, its
// ground truth, the root cause carried by every failing request and by no
// healthy one after the onset, its evidence present where the truth says,
// and a silent failure silent: no error signal in any record.
func TestIncidents(t *testing.T) {
	wantSilent := map[workload.Scenario]bool{TokPool: true, FieldDrop: true, StaleTemplate: true, BlackImages: true, LoraCold: true}
	for _, sc := range Incidents() {
		t.Run(string(sc), func(t *testing.T) {
			run := runIncident(t, sc)
			key, value := wantCause(run.g, sc)
			loud := 0
			for _, r := range run.failing {
				tr := r.Truth
				if c := tr.RootCause; c == nil || c.Kind != workload.CauseAttribute || c.Attribute != key || c.Value != value {
					t.Fatalf("root cause %+v, want %s=%s", c, key, value)
				}
				if !carries(r, key, value) {
					t.Fatalf("failing request %s does not carry %s=%s", tr.ReqID, key, value)
				}
				signals := errorSignals(r)
				if tr.Silent != (len(signals) == 0) {
					t.Fatalf("%s: silent=%v, but its error signals are %v", tr.ReqID, tr.Silent, signals)
				}
				if !tr.Silent {
					loud++
				}
				if len(tr.Evidence) == 0 {
					t.Fatalf("%s: no evidence in the truth", tr.ReqID)
				}
				for _, ev := range tr.Evidence {
					checkEvidence(t, r, ev)
				}
			}
			switch {
			case sc == KVThrash && (loud == 0 || loud == len(run.failing)):
				t.Errorf("%d of %d thrashed requests are loud; want the aborted ones loud, the slow ones silent", loud, len(run.failing))
			case sc != KVThrash && wantSilent[sc] != (loud == 0):
				t.Errorf("%d of %d failing requests are loud; want silent = %v", loud, len(run.failing), wantSilent[sc])
			}
			for _, r := range run.healthy {
				if carries(r, key, value) {
					t.Fatalf("healthy request %s after the onset carries the root cause %s=%s", r.Truth.ReqID, key, value)
				}
				if s := errorSignals(r); len(s) > 0 {
					t.Fatalf("healthy request %s carries error signals %v", r.Truth.ReqID, s)
				}
			}
			for _, ev := range run.failing[0].Truth.Evidence {
				contrastEvidence(t, run, ev)
			}
		})
	}
}

// checkEvidence: the failing request shows ev where the truth says.
func checkEvidence(t *testing.T, r *workload.Request, ev workload.Evidence) {
	t.Helper()
	spans := spansAt(r, ev.Stage)
	if len(spans) == 0 {
		t.Fatalf("%s: evidence %+v at a stage the request has no span at", r.Truth.ReqID, ev)
	}
	s := spans[0]
	switch ev.Kind {
	case workload.EvidenceValue, workload.EvidenceErrorAttribute:
		if v, _ := attr(s.Attrs, ev.Attribute); v.String() != ev.Value {
			t.Fatalf("%s: %s=%q at %s, evidence says %q", r.Truth.ReqID, ev.Attribute, v.String(), ev.Stage, ev.Value)
		}
	case workload.EvidenceMissingField:
		if _, ok := attr(s.Attrs, ev.Attribute); ok {
			t.Fatalf("%s: %s still present at %s", r.Truth.ReqID, ev.Attribute, ev.Stage)
		}
	case workload.EvidenceErrorStatus:
		if s.Error == "" {
			t.Fatalf("%s: %s ended without an error status", r.Truth.ReqID, ev.Stage)
		}
	case workload.EvidenceException:
		if len(s.Events) == 0 || s.Events[0].Name != "exception" {
			t.Fatalf("%s: %s has no exception event", r.Truth.ReqID, ev.Stage)
		}
	case workload.EvidenceErrorText:
		// A record of the service that ran the stage writes an error level in
		// its body and leaves the severity unset.
		for _, l := range allLogs(r) {
			if l.Service == s.Service && l.Severity == 0 && strings.EqualFold(bodyLevel(l.Body), "error") {
				return
			}
		}
		t.Fatalf("%s: no error written in the text of %s's records", r.Truth.ReqID, s.Service.Instance)
	case workload.EvidenceLatency:
	default:
		t.Fatalf("unknown evidence kind %q", ev.Kind)
	}
}

// contrastEvidence: healthy requests after the onset do not show ev.
func contrastEvidence(t *testing.T, run incidentRun, ev workload.Evidence) {
	t.Helper()
	atStage := func(reqs []*workload.Request) (spans []workload.Span) {
		for _, r := range reqs {
			spans = append(spans, spansAt(r, ev.Stage)...)
		}
		return spans
	}
	healthy := atStage(run.healthy)
	if len(healthy) == 0 {
		t.Fatalf("no healthy span at %s to contrast %+v with", ev.Stage, ev)
	}
	switch ev.Kind {
	case workload.EvidenceLatency:
		bad, good := durations(atStage(run.failing)), durations(healthy)
		if ratio := quantile(bad, 0.5) / quantile(good, 0.5); ratio < 4 || quantile(bad, 0.1) < quantile(good, 0.5) {
			t.Errorf("%s takes %.0f ms at the median (p10 %.0f) when failing, %.0f ms when healthy; want several times longer",
				ev.Stage, quantile(bad, 0.5), quantile(bad, 0.1), quantile(good, 0.5))
		}
	case workload.EvidenceValue:
		failingValues := map[string]bool{}
		for _, r := range run.failing {
			for _, e := range r.Truth.Evidence {
				if e.Kind == ev.Kind && e.Attribute == ev.Attribute {
					failingValues[e.Value] = true
				}
			}
		}
		for _, s := range healthy {
			if v, _ := attr(s.Attrs, ev.Attribute); failingValues[v.String()] {
				t.Fatalf("healthy %s has %s=%s, a value of the failure", ev.Stage, ev.Attribute, v.String())
			}
		}
	case workload.EvidenceMissingField:
		for _, s := range healthy {
			if _, ok := attr(s.Attrs, ev.Attribute); !ok {
				t.Fatalf("healthy %s lacks %s too", ev.Stage, ev.Attribute)
			}
		}
	}
}

// TestTokPoolStaysUnderTwoSeconds: the exhausted pool makes one stage slow,
// while the request stays under 2 s and most of it under the global p99,
// which the engine sets.
func TestTokPoolStaysUnderTwoSeconds(t *testing.T) {
	run := runIncident(t, TokPool)
	var totals, healthyTotals []float64
	for _, r := range run.failing {
		totals = append(totals, durations(spansAt(r, stEdge))...)
		warned := false
		for _, l := range r.Logs {
			warned = warned || l.Service == run.g.topo.tok[1] && strings.Contains(l.Body, " - WARNING - worker pool saturated")
		}
		if !warned {
			t.Fatalf("%s: no pool saturation warning", r.Truth.ReqID)
		}
	}
	for _, r := range run.healthy {
		healthyTotals = append(healthyTotals, durations(spansAt(r, stEdge))...)
	}
	p99 := quantile(slices.Concat(totals, healthyTotals), 0.99)
	above := 0
	for _, d := range totals {
		if d > p99 {
			above++
		}
	}
	if worst := slices.Max(totals); worst >= 2000 || float64(above) > 0.25*float64(len(totals)) {
		t.Fatalf("tokpool requests take up to %.0f ms, %d of %d above the global p99 of %.0f ms", worst, above, len(totals), p99)
	}
	if bad, good := quantile(durations(spansOfAll(run.failing, stTokenize)), 0), slices.Max(durations(spansOfAll(run.healthy, stTokenize))); bad <= good {
		t.Fatalf("tok/encode takes at least %.0f ms when failing, up to %.0f ms when healthy", bad, good)
	}
}

func spansOfAll(reqs []*workload.Request, stage string) []workload.Span {
	var out []workload.Span
	for _, r := range reqs {
		out = append(out, spansAt(r, stage)...)
	}
	return out
}

// TestLateWriteArrivesLate: the writer's failure is one plain-text line,
// severity unset, seconds after the response went out, in the writer's own
// trace, naming the request only in its text.
func TestLateWriteArrivesLate(t *testing.T) {
	run := runIncident(t, LateWrite)
	for _, r := range run.failing {
		if len(r.Late) != 1 {
			t.Fatalf("%s: %d late records, want 1", r.Truth.ReqID, len(r.Late))
		}
		l, edge := r.Late[0], spansAt(r, stEdge)[0]
		if gap := l.Time.Sub(edge.End); gap < 3*time.Second || gap > 10*time.Second {
			t.Fatalf("%s: the failure is written %v after the response", r.Truth.ReqID, gap)
		}
		if l.Severity != 0 || len(l.Attrs) != 0 || !strings.HasPrefix(l.Body, "ERROR ") || !strings.Contains(l.Body, r.Truth.ReqID) {
			t.Fatalf("%s: late record %+v", r.Truth.ReqID, l)
		}
		if tid := l.Context.TraceID().String(); tid == r.Truth.TraceIDs[0] || !slices.Contains(r.Truth.TraceIDs[1:], tid) {
			t.Fatalf("%s: late record in trace %s, want one of the async traces %v", r.Truth.ReqID, tid, r.Truth.TraceIDs[1:])
		}
		if r.Truth.End != l.Time {
			t.Fatalf("%s: truth ends at %v, before its late record at %v", r.Truth.ReqID, r.Truth.End, l.Time)
		}
	}
}
