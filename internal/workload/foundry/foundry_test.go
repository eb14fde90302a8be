package foundry

import (
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
)

var healthy = Config{Incidents: []workload.Scenario{workload.Healthy}, Seed: 5}

func TestGeneratorDeterministic(t *testing.T) {
	cfg := Config{Incidents: Incidents(), Affected: 0.4, Warmup: 50, Seed: 42}
	a, _ := generate(t, cfg, 600)
	b, _ := generate(t, cfg, 600)
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Fatalf("request %d differs between two generators with seed %d:\n%+v\n%+v", i, cfg.Seed, a[i].Truth, b[i].Truth)
		}
	}
	// Timestamps aside (the req_id embeds the start time): the same ids and contents.
	cfg.Requests = 600
	g, _ := NewGenerator(cfg)
	for i := range a {
		r := g.Next(testEnd.Add(time.Hour + time.Duration(i)*time.Millisecond))
		if r.Truth.ReqID[len(r.Truth.ReqID)-6:] != a[i].Truth.ReqID[len(a[i].Truth.ReqID)-6:] || r.Truth.Scenario != a[i].Truth.Scenario ||
			!reflect.DeepEqual(r.Truth.TraceIDs, a[i].Truth.TraceIDs) || r.Truth.InputHash != a[i].Truth.InputHash || r.Records() != a[i].Records() {
			t.Fatalf("request %d changed with its end time: %+v vs %+v", i, r.Truth, a[i].Truth)
		}
	}
	cfg.Seed = 43
	c, _ := generate(t, cfg, 600)
	for i := range a {
		if c[i].Truth.ReqID == a[i].Truth.ReqID || c[i].Truth.TraceIDs[0] == a[i].Truth.TraceIDs[0] {
			t.Fatalf("seeds 42 and 43 produced the same request %d: %s", i, a[i].Truth.ReqID)
		}
	}
}

var (
	pythonLine = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - \S+ - [A-Z]+ - `)
	log4jLine  = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[[^\]]+\] [A-Z]+ +\S+ - `)
)

func format(body string) string {
	switch {
	case pythonLine.MatchString(body):
		return "python"
	case log4jLine.MatchString(body):
		return "log4j"
	case strings.HasPrefix(body, "time="):
		return "slog-text"
	case strings.HasPrefix(body, `{"time":`):
		return "slog-json"
	case strings.HasPrefix(body, `{"event":`):
		return "structlog"
	case strings.HasPrefix(body, "lvl="):
		return "logfmt"
	case strings.HasPrefix(body, "\tat ") || strings.Contains(body, "Exception: "):
		return "stack-line"
	}
	return "plain"
}

// TestHealthyTraffic holds healthy traffic to its shape: no error signal in
// any record, every log format, the req_id under aliases loomgen does not use
// (or in the text only), and categorical variety common enough that keeping
// every minority value keeps much of the healthy traffic.
func TestHealthyTraffic(t *testing.T) {
	reqs, _ := generate(t, healthy, 6000)
	var records, logs, unsetSeverity, images int
	formats := map[string]int{}
	idKeys := map[string]int{}
	values := map[string]map[string]int{}
	count := func(key, value string) {
		if values[key] == nil {
			values[key] = map[string]int{}
		}
		values[key][value]++
	}
	var tok, totals []float64
	for _, r := range reqs {
		tr := r.Truth
		if tr.Failed || tr.RootCause != nil || tr.Silent || tr.Evidence != nil || tr.Scenario != workload.Healthy {
			t.Fatalf("healthy traffic produced %+v", tr)
		}
		if created, ok := golden.ParseReqID(tr.ReqID); !ok || !created.Equal(tr.Start.Truncate(time.Millisecond)) {
			t.Fatalf("req_id %q is not the default format embedding the start %v", tr.ReqID, tr.Start)
		}
		if s := errorSignals(r); len(s) > 0 {
			t.Fatalf("healthy request %s carries error signals %v", tr.ReqID, s)
		}
		if len(r.Late) > 0 {
			t.Fatalf("healthy request %s has late records", tr.ReqID)
		}
		records += r.Records()
		chat := len(spansAt(r, stTokenize)) > 0
		if !chat {
			images++
		}
		for _, s := range r.Spans {
			if s.Start.Before(tr.Start) || s.End.After(tr.End) {
				t.Fatalf("span %s [%v, %v] outside the request [%v, %v]", s.Name, s.Start, s.End, tr.Start, tr.End)
			}
			for _, kv := range s.Attrs {
				if kv.Value.AsString() == tr.ReqID {
					idKeys[string(kv.Key)]++
				}
				switch k := string(kv.Key); k {
				case "orch.lane", "orch.template", "gen_ai.response.finish_reasons", "judge.grade", "prefix_cache", "img.preset":
					if chat || k == "img.preset" {
						count(k, kv.Value.String())
					}
				case "guard.flagged", "img.nsfw_filtered":
					count(k, kv.Value.String())
				}
			}
		}
		tok = append(tok, durations(spansAt(r, stTokenize))...)
		if chat {
			totals = append(totals, durations(spansAt(r, stEdge))...)
		}
		for _, l := range r.Logs {
			logs++
			formats[format(l.Body)]++
			if l.Severity == 0 {
				unsetSeverity++
			}
			if strings.HasPrefix(l.Body, "{") {
				var obj map[string]any
				if err := json.Unmarshal([]byte(l.Body), &obj); err != nil {
					t.Fatalf("invalid JSON %s: %v", l.Body, err)
				}
				for k, v := range obj {
					if v == tr.ReqID {
						idKeys[k]++
					}
				}
			} else if i := strings.Index(l.Body, tr.ReqID); i > 0 && l.Body[i-1] == '=' {
				idKeys[l.Body[strings.LastIndexByte(l.Body[:i-1], ' ')+1:i-1]]++
			} else if i >= 0 {
				idKeys["(text)"]++
			}
		}
	}
	perReq := float64(records) / float64(len(reqs))
	t.Logf("%.1f records/request, %.0f%% images, formats %v, %.0f%% of logs without a severity number, req_id spelled %v",
		perReq, 100*float64(images)/float64(len(reqs)), formats, 100*float64(unsetSeverity)/float64(logs), idKeys)
	t.Logf("healthy value shares: %v", values)
	if perReq < 14 || perReq > 22 {
		t.Errorf("%.1f records per request, want ~18", perReq)
	}
	for _, f := range []string{"python", "log4j", "slog-text", "slog-json", "structlog", "logfmt", "stack-line", "plain"} {
		if formats[f] == 0 {
			t.Errorf("no %s log bodies", f)
		}
	}
	if share := float64(unsetSeverity) / float64(logs); share < 0.3 || share > 0.8 {
		t.Errorf("%.0f%% of the logs leave the severity unset; want many, not all", 100*share)
	}
	for _, k := range []string{golden.ReqID, "request_id", "x_request_id", "inference_id"} {
		if idKeys[k] > 0 {
			t.Errorf("the req_id is spelled %s, as loomgen spells it", k)
		}
	}
	for k := range idKeys {
		if k != "(text)" && aliases[k] != golden.ReqID {
			t.Errorf("the req_id is spelled %s, which is no alias of req_id", k)
		}
	}
	for _, k := range []string{"x-request-id", "requestId", "llm.request_id", "(text)"} {
		if idKeys[k] == 0 {
			t.Errorf("no record spells the req_id %s", k)
		}
	}
	for key, want := range map[string]map[string]float64{
		"orch.lane":                      {"interactive": .40, "batch": .25, "priority": .20, "eval": .15},
		"orch.template":                  {"chat@r7": .40, "qa@r19": .25, "summarize@r4": .20, "extract@r2": .15},
		"gen_ai.response.finish_reasons": {"stop": .70, "length": .22, "tool_calls": .08},
		"judge.grade":                    {"excellent": .35, "good": .40, "fair": .25},
		"prefix_cache":                   {"miss": prefixMissShare},
		"guard.flagged":                  {"true": flaggedShare * (1 - imageShare)},
		"img.preset":                     {"quality": .55, "balanced": .30, "fast": .15},
		"img.nsfw_filtered":              {"true": nsfwShare},
	} {
		total := 0
		for _, n := range values[key] {
			total += n
		}
		for v, w := range want {
			if got := float64(values[key][v]) / float64(total); math.Abs(got-w) > 0.025+w/10 {
				t.Errorf("%s=%s on %.3f of healthy records, want ~%.2f", key, v, got, w)
			}
		}
	}
	if m := quantile(tok, 0.5); m < 4 || m > 6 {
		t.Errorf("tok/encode takes %.1f ms at the median, want ~5", m)
	}
	if p99, worst := quantile(totals, 0.99), slices.Max(totals); p99 < 900 || worst > 1500 {
		t.Errorf("healthy chat requests take %.0f ms at p99 and %.0f ms at worst; want the engine to make a p99 near a second, under 1.5 s", p99, worst)
	}
}

// TestEveryRecordIsTied: every span and log record of a request is tied to it
// in one of the ways ARCHITECTURE.md §2 allows: the req_id as an attribute
// (canonical or an alias), in the body text, or the trace context of a trace
// whose records carry it. The records tied by none are the template noise
// that Truth.NoiseLogs counts; the counts of Truth match the records.
func TestEveryRecordIsTied(t *testing.T) {
	reqs, _ := generate(t, Config{Incidents: Incidents(), Affected: 0.5, Warmup: 100, Seed: 9}, 3000)
	var noise, traced, logs int
	for _, r := range reqs {
		tr := r.Truth
		id := tr.ReqID
		explicit := func(body string, kvs []attributeKV) bool {
			for _, kv := range kvs {
				if canonical(kv.key) == golden.ReqID && kv.value == id {
					return true
				}
			}
			return strings.Contains(body, id)
		}
		keyed := map[trace.TraceID]bool{}
		for _, s := range r.Spans {
			if explicit("", kvsOf(s.Attrs)) {
				keyed[s.Context.TraceID()] = true
			}
			if !slices.Contains(tr.TraceIDs, s.Context.TraceID().String()) {
				t.Fatalf("span %s of %s in trace %s that the truth does not list", s.Name, id, s.Context.TraceID())
			}
		}
		if r.Spans[0].Parent.IsValid() || tr.TraceIDs[0] != r.Spans[0].Context.TraceID().String() {
			t.Fatalf("%s: the edge's root span is not first in the primary trace", id)
		}
		for _, l := range allLogs(r) {
			if explicit(l.Body, kvsOf(l.Attrs)) && l.Context.IsValid() {
				keyed[l.Context.TraceID()] = true
			}
		}
		var gotLogs, gotTraced, gotNoise int
		for _, s := range r.Spans {
			if !explicit("", kvsOf(s.Attrs)) && !keyed[s.Context.TraceID()] {
				t.Fatalf("span %s of %s carries no req_id and its trace none either", s.Name, id)
			}
		}
		for _, l := range allLogs(r) {
			switch {
			case explicit(l.Body, kvsOf(l.Attrs)):
				gotLogs++
			case l.Context.IsValid() && keyed[l.Context.TraceID()]:
				gotTraced++
			case l.Context.IsValid():
				t.Fatalf("log %q of %s is in a trace no record of the request names", l.Body, id)
			default:
				gotNoise++
			}
		}
		if gotLogs != tr.Logs || gotTraced != tr.TracedLogs || gotNoise != tr.NoiseLogs || len(r.Spans) != tr.Spans {
			t.Fatalf("%s: %d id / %d traced / %d noise logs and %d spans; truth says %d / %d / %d and %d",
				id, gotLogs, gotTraced, gotNoise, len(r.Spans), tr.Logs, tr.TracedLogs, tr.NoiseLogs, tr.Spans)
		}
		if last := allLogs(r); len(r.Late) > 0 && !last[len(last)-1].Time.Equal(tr.End) {
			t.Fatalf("%s: the truth ends at %v, its last record at %v", id, tr.End, last[len(last)-1].Time)
		}
		logs += len(allLogs(r))
		noise += gotNoise
		traced += gotTraced
	}
	t.Logf("%d logs: %.0f%% tied by trace context only, %.0f%% noise", logs, 100*float64(traced)/float64(logs), 100*float64(noise)/float64(logs))
	if traced == 0 || noise == 0 {
		t.Fatalf("want logs tied by trace context only (%d) and noise lines (%d)", traced, noise)
	}
}

type attributeKV struct{ key, value string }

func kvsOf(attrs []attribute.KeyValue) []attributeKV {
	out := make([]attributeKV, len(attrs))
	for i, kv := range attrs {
		out[i] = attributeKV{string(kv.Key), kv.Value.String()}
	}
	return out
}

// conventions are the names in records that Loom may know: semantic
// conventions, the contract's names and aliases, generic logging keys.
func convention(name string) bool {
	for _, p := range []string{"http.", "gen_ai.", "exception.", "service.", "host."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	_, alias := aliases[name]
	return alias || slices.Contains([]string{golden.Stage, "time", "level", "msg", "event", "timestamp", "lvl", "err", "status",
		"route", "source", "index", "hits", "attempt", "running", "waiting", "idle", "segments", "bytes", "score", "steps", "key", "busy", "queue"}, name)
}

// TestVocabulary: Vocabulary names every service, stage, attribute and body
// key the family writes, other than conventions Loom may know, and nothing of
// the golden-field contract.
func TestVocabulary(t *testing.T) {
	vocab := Vocabulary()
	reqs, _ := generate(t, Config{Incidents: Incidents(), Affected: 0.5, Warmup: 100, Seed: 13}, 3000)
	seen := map[string]bool{}
	for _, r := range reqs {
		for _, s := range r.Spans {
			seen[s.Service.Name] = true
			stage, _ := attr(s.Attrs, golden.Stage)
			seen[stage.AsString()] = true
			for _, kv := range s.Attrs {
				seen[string(kv.Key)] = true
			}
		}
		for _, l := range allLogs(r) {
			seen[l.Service.Name] = true
			for _, k := range keysOf(t, l.Body) {
				seen[k] = true
			}
		}
	}
	for name := range seen {
		if !convention(name) && !slices.Contains(vocab, name) {
			t.Errorf("the family writes %q, which Vocabulary does not list", name)
		}
	}
	for _, name := range vocab {
		if convention(name) || golden.IsResourceUsage(name) || !seen[name] {
			t.Errorf("Vocabulary lists %q: a convention Loom may know, or a name no record carries", name)
		}
	}
}
