package workload

import (
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"

	"github.com/loom-otel/loom/internal/golden"
)

var testEnd = time.Date(2024, 5, 9, 6, 8, 10, 0, time.UTC)

// generate returns n requests of cfg (Requests = n).
func generate(t *testing.T, cfg Config, n int) ([]*Request, *Generator) {
	t.Helper()
	cfg.Requests = n
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*Request, n)
	for i := range out {
		out[i] = g.Next(testEnd.Add(time.Duration(i) * time.Millisecond))
	}
	return out, g
}

func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spansNamed(r *Request, name string) []Span {
	var out []Span
	for _, s := range r.Spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func share(reqs []*Request, sc Scenario) float64 {
	n := 0
	for _, r := range reqs {
		if r.Truth.Scenario == sc {
			n++
		}
	}
	return float64(n) / float64(len(reqs))
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

func TestGeneratorDeterministic(t *testing.T) {
	cfg := Config{Scenarios: []Scenario{S1, S2, S3}, Affected: 0.3, Seed: 42}
	a, _ := generate(t, cfg, 400)
	b, _ := generate(t, cfg, 400)
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Fatalf("request %d differs between two generators with seed %d:\n%+v\n%+v", i, cfg.Seed, a[i].Truth, b[i].Truth)
		}
	}

	// Timestamps aside (the req_id embeds the start time): the same ids and contents.
	cfg.Requests = 400
	g, _ := NewGenerator(cfg)
	for i := range a {
		r := g.Next(testEnd.Add(time.Hour + time.Duration(i)*time.Millisecond))
		if r.Truth.ReqID[len(r.Truth.ReqID)-6:] != a[i].Truth.ReqID[len(a[i].Truth.ReqID)-6:] ||
			!reflect.DeepEqual(r.Truth.TraceIDs, a[i].Truth.TraceIDs) || r.Truth.InputHash != a[i].Truth.InputHash ||
			r.Records() != a[i].Records() {
			t.Fatalf("request %d changed with its end time: %+v vs %+v", i, r.Truth, a[i].Truth)
		}
	}

	cfg.Seed = 43
	c, _ := generate(t, cfg, 400)
	same := 0
	for i := range a {
		if c[i].Truth.ReqID == a[i].Truth.ReqID || c[i].Truth.TraceIDs[0] == a[i].Truth.TraceIDs[0] {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("seeds 42 and 43 produced %d identical req_ids or trace ids", same)
	}
}

func TestHealthyTraffic(t *testing.T) {
	reqs, _ := generate(t, Config{Scenarios: []Scenario{Healthy}, Seed: 5}, 3000)
	var records, logs, noise, stageLogs, traced, prompts int
	formats := map[string]int{}
	aliases := map[string]int{}
	var norm, post []float64
	for _, r := range reqs {
		tr := r.Truth
		if tr.Failed || tr.RootCause != nil || tr.Scenario != Healthy || strings.HasPrefix(tr.ReqID, "req-celery-") {
			t.Fatalf("healthy traffic produced %+v", tr)
		}
		if tr.Spans != len(r.Spans) || tr.Logs+tr.NoiseLogs != len(r.Logs) {
			t.Fatalf("truth counts %d spans, %d+%d logs; request has %d, %d", tr.Spans, tr.Logs, tr.NoiseLogs, len(r.Spans), len(r.Logs))
		}
		if created, ok := golden.ParseReqID(tr.ReqID); !ok || !created.Equal(tr.Start.Truncate(time.Millisecond)) {
			t.Fatalf("req_id %q does not embed the start %v", tr.ReqID, tr.Start)
		}
		if strings.HasPrefix(tr.InputHash, slowInputPrefix) {
			t.Fatalf("healthy input_hash %s is in the S2 family", tr.InputHash)
		}
		if len(tr.TraceIDs) < 2 || r.Spans[0].Context.TraceID().String() != tr.TraceIDs[0] {
			t.Fatalf("want the primary trace first and at least one async trace: %v", tr.TraceIDs)
		}
		for _, s := range r.Spans {
			if v, _ := attr(s.Attrs, golden.ReqID); v.AsString() != tr.ReqID {
				t.Fatalf("span %s lacks req_id", s.Name)
			}
			if _, ok := attr(s.Attrs, golden.Stage); !ok {
				t.Fatalf("span %s lacks stage", s.Name)
			}
			for _, kv := range s.Attrs {
				if strings.HasPrefix(string(kv.Key), golden.ResourceUsagePrefix) && kv.Value.Type() != attribute.INT64 && kv.Value.Type() != attribute.FLOAT64 {
					t.Fatalf("%s is a %s, want a number", kv.Key, kv.Value.Type())
				}
			}
			if s.Start.Before(tr.Start) || s.End.After(tr.End) || s.End.Before(s.Start) {
				t.Fatalf("span %s [%v, %v] outside the request [%v, %v]", s.Name, s.Start, s.End, tr.Start, tr.End)
			}
			if s.Error != "" {
				t.Fatalf("healthy span %s failed: %s", s.Name, s.Error)
			}
		}
		for _, s := range spansNamed(r, "vectorstore/write") {
			if s.Parent.IsValid() || s.Context.TraceID() == r.Spans[0].Context.TraceID() {
				t.Fatal("the async vector-store write must start a trace of its own")
			}
		}
		fwd := spansNamed(r, "model/forward")
		if len(fwd) != 1 {
			t.Fatalf("%d model/forward spans", len(fwd))
		}
		if d := fwd[0].End.Sub(fwd[0].Start); d < 120*time.Millisecond || d > 900*time.Millisecond {
			t.Fatalf("model/forward took %v, want 120–900 ms", d)
		}
		norm = append(norm, float64(spansNamed(r, "preproc/normalize")[0].End.Sub(spansNamed(r, "preproc/normalize")[0].Start))/1e6)
		post = append(post, float64(spansNamed(r, "postproc/filter")[0].End.Sub(spansNamed(r, "postproc/filter")[0].Start))/1e6)

		records += r.Records()
		for _, l := range r.Logs {
			logs++
			if !strings.Contains(l.Body, tr.ReqID) && len(l.Attrs) == 0 {
				noise++
			}
			switch {
			case json.Valid([]byte(l.Body)) && l.Body[0] == '{':
				formats["json"]++
			case strings.HasPrefix(l.Body, "level="):
				formats["logfmt"]++
			default:
				formats["plain"]++
			}
			if strings.Contains(l.Body, "\nTraceback (most recent call last):\n") {
				formats["traceback"]++
			}
			if strings.Contains(l.Body, "stage") {
				stageLogs++
			}
			if l.Context.IsValid() {
				traced++
			}
			if strings.Contains(l.Body, `"prompt":`) {
				prompts++
			}
			for _, alias := range []string{"request_id", "x_request_id", "model_name", "duration_ms", "inference_id"} {
				if strings.Contains(l.Body, `"`+alias+`"`) || strings.Contains(l.Body, " "+alias+"=") {
					aliases[alias]++
				}
			}
		}
	}
	perReq := float64(records) / float64(len(reqs))
	t.Logf("%.1f records/request, %.1f logs/request, %.0f%% of logs without req_id, %.0f%% name a stage, formats %v, aliases %v",
		perReq, float64(logs)/float64(len(reqs)), 100*float64(noise)/float64(logs), 100*float64(stageLogs)/float64(logs), formats, aliases)
	if perReq < 10 || perReq > 16 {
		t.Errorf("%.1f records per healthy request, want roughly 10–15", perReq)
	}
	if float64(stageLogs) > 0.4*float64(logs) {
		t.Errorf("%d of %d log lines name a stage: most lines should be template noise", stageLogs, logs)
	}
	if noise == 0 || traced == 0 || traced == logs {
		t.Errorf("want some logs without req_id (%d) and logs both with and without trace context (%d of %d)", noise, traced, logs)
	}
	for _, f := range []string{"json", "logfmt", "plain", "traceback"} {
		if formats[f] == 0 {
			t.Errorf("no %s log bodies", f)
		}
	}
	for _, a := range []string{"request_id", "x_request_id", "model_name", "duration_ms", "inference_id"} {
		if aliases[a] == 0 {
			t.Errorf("no log uses the alias %s", a)
		}
	}
	if prompts == 0 || prompts > len(reqs)/10 {
		t.Errorf("%d of %d requests log a raw prompt; want a few", prompts, len(reqs))
	}
	if m := mean(norm); m < 4 || m > 6 {
		t.Errorf("preproc/normalize takes %.1f ms on average, want ~5", m)
	}
	if m := mean(post); m < 7 || m > 9 {
		t.Errorf("postproc/filter takes %.1f ms on average, want ~8", m)
	}
}

func TestAffectedShare(t *testing.T) {
	const affected, n = 0.12, 6000
	for _, sc := range []Scenario{S1, S2, S3} {
		t.Run(string(sc), func(t *testing.T) {
			reqs, g := generate(t, Config{Scenarios: []Scenario{Healthy, sc}, Affected: affected, Seed: 11}, n)
			if sc == S1 {
				reqs = reqs[g.upgradeAt:] // nothing can be affected before the upgrade
			}
			if got := share(reqs, sc); math.Abs(got-affected) > 0.015 {
				t.Errorf("%s affects %.3f of requests, want ~%.2f", sc, got, affected)
			}
			for _, r := range reqs {
				tr := r.Truth
				if tr.Failed != (tr.Scenario == sc) || !reflect.DeepEqual(tr.RootCause, causeOf(tr.Scenario)) {
					t.Fatalf("truth %+v (cause %+v) for a %s run", tr, tr.RootCause, sc)
				}
			}
		})
	}
	t.Run("mixed", func(t *testing.T) {
		reqs, _ := generate(t, Config{Scenarios: []Scenario{S1, S2, S3}, Affected: 0.3, Seed: 11}, n)
		for _, sc := range []Scenario{S1, S2, S3} {
			if got := share(reqs, sc); math.Abs(got-0.1) > 0.015 {
				t.Errorf("%s affects %.3f of requests, want ~0.1 (a third of 0.3)", sc, got)
			}
		}
	})
}

func TestS1ModelUpgradeDropsField(t *testing.T) {
	reqs, g := generate(t, Config{Scenarios: []Scenario{S1}, Affected: 0.12, Seed: 21}, 4000)
	var withHash, withoutHash int
	for i, r := range reqs {
		upgraded := r.Truth.ModelVer == upgradedModel
		if upgraded != (r.Truth.Scenario == S1) || (upgraded && i < g.upgradeAt) {
			t.Fatalf("request %d (upgrade at %d) ran %s as %s", i, g.upgradeAt, r.Truth.ModelVer, r.Truth.Scenario)
		}
		for _, s := range spansNamed(r, "model/forward") {
			if s.Service == g.topo.model[3] && i >= g.upgradeAt {
				t.Fatalf("request %d ran on model-3 %s after its upgrade", i, baseModel)
			}
			ver, _ := attr(s.Attrs, golden.ModelVer)
			_, hasHash := attr(s.Attrs, "raw_output_hash")
			if ver.AsString() != s.Service.Version {
				t.Fatalf("model/forward of %s on an instance running %s", ver.AsString(), s.Service.Version)
			}
			switch {
			case ver.AsString() == upgradedModel && !hasHash:
				withoutHash++
			case ver.AsString() == baseModel && hasHash:
				withHash++
			default:
				t.Fatalf("model/forward of %s: raw_output_hash present = %v", ver.AsString(), hasHash)
			}
		}
		emptied := false
		for _, l := range r.Logs {
			if strings.Contains(l.Body, `"model_name":"`+upgradedModel) && strings.Contains(l.Body, "raw_output_hash") {
				t.Fatalf("v2.3.2 engine log still has raw_output_hash: %s", l.Body)
			}
			emptied = emptied || strings.Contains(l.Body, "output_length=0 filter_reason=empty_after_dedup")
			if upgraded && l.Severity >= log.SeverityError {
				t.Fatalf("S1 must log no error, got %s", l.Body)
			}
		}
		if emptied != upgraded {
			t.Fatalf("%s: postproc emptied the output = %v", r.Truth.ModelVer, emptied)
		}
		for _, s := range r.Spans {
			if s.Error != "" {
				t.Fatalf("S1 must fail no span; %s failed with %s", s.Name, s.Error)
			}
		}
	}
	if withHash == 0 || withoutHash == 0 {
		t.Fatalf("%d v2.3.1 and %d v2.3.2 forwards; want both", withHash, withoutHash)
	}
}

func TestS2SlowInputFamily(t *testing.T) {
	reqs, g := generate(t, Config{Scenarios: []Scenario{S2}, Affected: 0.12, Seed: 31}, 4000)
	for _, p := range g.slow {
		if golden.HashInput(p.text) != p.hash || !strings.HasPrefix(p.hash, slowInputPrefix) || !strings.Contains(p.text, "🔥") && !strings.Contains(p.text, "😂") && !strings.Contains(p.text, "🚀") {
			t.Fatalf("S2 prompt %q hashes to %s", p.text, p.hash)
		}
	}
	lat := map[bool][]float64{}
	mem := map[bool][]float64{}
	sm := map[bool][]float64{}
	tokens := map[bool][]float64{}
	for _, r := range reqs {
		slow := r.Truth.Scenario == S2
		if strings.HasPrefix(r.Truth.InputHash, slowInputPrefix) != slow {
			t.Fatalf("input_hash %s for a %s request", r.Truth.InputHash, r.Truth.Scenario)
		}
		if h, _ := attr(spansNamed(r, "preproc/normalize")[0].Attrs, golden.InputHash); h.AsString() != r.Truth.InputHash {
			t.Fatalf("preproc/normalize input_hash %s, truth %s", h.AsString(), r.Truth.InputHash)
		}
		f := spansNamed(r, "model/forward")[0]
		lat[slow] = append(lat[slow], float64(f.End.Sub(f.Start).Milliseconds()))
		v, _ := attr(f.Attrs, golden.GPUMemMb)
		mem[slow] = append(mem[slow], float64(v.AsInt64()))
		v, _ = attr(f.Attrs, golden.SMInstructions)
		sm[slow] = append(sm[slow], float64(v.AsInt64()))
		v, _ = attr(f.Attrs, golden.Tokens)
		tokens[slow] = append(tokens[slow], float64(v.AsInt64()))
	}
	if m := mean(lat[true]); math.Abs(m-4200) > 150 {
		t.Errorf("S2 model/forward takes %.0f ms on average, want ~4200", m)
	}
	if m := mean(lat[false]); m < 500 || m > 900 {
		t.Errorf("healthy model/forward takes %.0f ms on average", m)
	}
	if a, b := mean(mem[true]), mean(mem[false]); math.Abs(a-b) > 200 || math.Abs(b-10240) > 300 {
		t.Errorf("GPU memory %.0f MB (S2) vs %.0f MB: want both ~10.2 GB", a, b)
	}
	if ratio := mean(sm[true]) / mean(sm[false]); ratio < 1.8 || ratio > 2.3 {
		t.Errorf("S2 runs %.2fx the SM instructions, want ~2x", ratio)
	}
	if ratio := mean(tokens[true]) / mean(tokens[false]); ratio < 2.8 || ratio > 3.6 {
		t.Errorf("S2 inputs have %.2fx the tokens, want ~3.2x", ratio)
	}
}

var celeryReqID = regexp.MustCompile(`^req-celery-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestS3OvercommittedWorker(t *testing.T) {
	reqs, _ := generate(t, Config{Scenarios: []Scenario{S3}, Affected: 0.12, Seed: 41}, 3000)
	var failing, okTasks int
	for _, r := range reqs {
		tr := r.Truth
		celery := strings.HasPrefix(tr.ReqID, "req-celery-")
		if tr.Scenario != S3 {
			if tr.Failed {
				t.Fatalf("a request outside S3 failed: %+v", tr)
			}
			if celery {
				okTasks++
				if tr.Host != celeryGoodHost || len(spansNamed(r, "model/forward")) != 1 {
					t.Fatalf("healthy celery task on %s with %d model/forward", tr.Host, len(spansNamed(r, "model/forward")))
				}
			}
			continue
		}
		failing++
		if !celeryReqID.MatchString(tr.ReqID) || tr.Host != celeryBadHost {
			t.Fatalf("failing task %s on %s", tr.ReqID, tr.Host)
		}
		if tr.End.Sub(tr.Start) < celeryTimeLimit {
			t.Fatalf("failing task ran %v, want the 300 s time limit", tr.End.Sub(tr.Start))
		}
		if len(spansNamed(r, "model/forward")) != 0 || len(spansNamed(r, "celery/task_start")) != 1 {
			t.Fatal("a failing task must start and never reach model/forward")
		}
		if r.Spans[0].Error == "" {
			t.Fatal("the task span of a timed-out task must fail")
		}
		for _, s := range r.Spans {
			if s.Service.Host != celeryBadHost {
				t.Fatalf("span %s on %s", s.Name, s.Service.Host)
			}
			if cpu, ok := attr(s.Attrs, golden.CPUPercent); ok && cpu.AsFloat64() < 97 {
				t.Fatalf("cpu_percent %v, want ~100", cpu.AsFloat64())
			}
			if mem, ok := attr(s.Attrs, golden.GPUMemMb); ok && mem.AsInt64() != 0 {
				t.Fatalf("gpu_mem_mb %v, want 0", mem.AsInt64())
			}
		}
		died := false
		for _, l := range r.Logs {
			if l.Service.Host != celeryBadHost {
				t.Fatalf("log %q on %s", l.Body, l.Service.Host)
			}
			if l.Severity == log.SeverityError && strings.HasPrefix(l.Body, "Pool process pid ") &&
				strings.Contains(l.Body, "died unexpectedly") && strings.Contains(l.Body, "\nTraceback (most recent call last):\n") {
				died = true
			}
		}
		if !died {
			t.Fatal("no ERROR record with the dead pool process and its traceback")
		}
	}
	if math.Abs(float64(failing)/float64(len(reqs))-0.12) > 0.02 || okTasks == 0 {
		t.Fatalf("%d failing and %d healthy celery tasks in %d requests", failing, okTasks, len(reqs))
	}
}
