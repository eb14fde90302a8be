package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/golden"
)

func readTruth(t *testing.T, buf *bytes.Buffer) []Truth {
	t.Helper()
	var out []Truth
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var tr Truth
		if err := json.Unmarshal(sc.Bytes(), &tr); err != nil {
			t.Fatalf("truth line %q: %v", sc.Text(), err)
		}
		out = append(out, tr)
	}
	return out
}

// reqIDIn returns the first req_id written in text, or "".
func reqIDIn(text string) string {
	i := strings.Index(text, "req-")
	if i < 0 {
		return ""
	}
	end := i
	for end < len(text) && (text[end] == '-' || text[end] >= 'a' && text[end] <= 'z' || text[end] >= '0' && text[end] <= '9') {
		end++
	}
	return text[i:end]
}

func TestRunDeliversEveryRecordOnce(t *testing.T) {
	for _, proto := range []Protocol{GRPC, HTTP} {
		t.Run(string(proto), func(t *testing.T) {
			s := startSink(t, true)
			endpoint := s.GRPCEndpoint
			if proto == HTTP {
				endpoint = s.HTTPEndpoint
			}
			var truthBuf bytes.Buffer
			cfg := Config{Scenarios: []Scenario{S1, S2, S3}, Affected: 0.3, Requests: 600, Seed: 7}
			sum, err := Run(context.Background(), cfg, Target{Endpoint: endpoint, Protocol: proto, Insecure: true}, &truthBuf)
			if err != nil {
				t.Fatal(err)
			}
			truths := readTruth(t, &truthBuf)
			if sum.Requests != cfg.Requests || len(truths) != cfg.Requests {
				t.Fatalf("summary says %d requests, truth has %d; want %d", sum.Requests, len(truths), cfg.Requests)
			}
			gotSpans, gotLogs := sinkCounts(s)
			if gotSpans != sum.Spans || gotLogs != sum.Logs {
				t.Fatalf("sink received %d spans, %d logs; summary says %d, %d", gotSpans, gotLogs, sum.Spans, sum.Logs)
			}

			byTrace := map[string]*Truth{}
			byReq := map[string]*Truth{}
			wantNoise := 0
			for i := range truths {
				tr := &truths[i]
				byReq[tr.ReqID] = tr
				for _, id := range tr.TraceIDs {
					byTrace[id] = tr
				}
				wantNoise += tr.NoiseLogs
			}

			spansOf, logsOf := map[string]int{}, map[string]int{}
			seen := map[string]bool{}
			for _, td := range s.Traces() {
				for _, rs := range td.ResourceSpans().All() {
					for _, ss := range rs.ScopeSpans().All() {
						for _, span := range ss.Spans().All() {
							key := span.TraceID().String() + span.SpanID().String()
							if seen[key] {
								t.Fatalf("span %s arrived twice", key)
							}
							seen[key] = true
							tr := byTrace[span.TraceID().String()]
							if tr == nil {
								t.Fatalf("span %q in trace %s that no truth line lists", span.Name(), span.TraceID())
							}
							if id, _ := span.Attributes().Get(golden.ReqID); id.Str() != tr.ReqID {
								t.Fatalf("span %q carries req_id %q, its trace belongs to %s", span.Name(), id.Str(), tr.ReqID)
							}
							spansOf[tr.ReqID]++
						}
					}
				}
			}
			noise := 0
			for _, ld := range s.Logs() {
				for _, rl := range ld.ResourceLogs().All() {
					for _, sl := range rl.ScopeLogs().All() {
						for _, rec := range sl.LogRecords().All() {
							id := reqIDIn(rec.Body().Str())
							if v, ok := rec.Attributes().Get(golden.ReqID); ok {
								id = v.Str()
							}
							if id == "" {
								noise++
								continue
							}
							tr := byReq[id]
							if tr == nil {
								t.Fatalf("log %q names req_id %q that no truth line has", rec.Body().Str(), id)
							}
							if tid := rec.TraceID(); tid != (pcommon.TraceID{}) && byTrace[tid.String()] != tr {
								t.Fatalf("log %q of %s carries trace %s of another request", rec.Body().Str(), id, tid)
							}
							logsOf[id]++
						}
					}
				}
			}
			for _, tr := range truths {
				if spansOf[tr.ReqID] != tr.Spans || logsOf[tr.ReqID] != tr.Logs {
					t.Fatalf("%s: received %d spans, %d logs; truth says %d, %d", tr.ReqID, spansOf[tr.ReqID], logsOf[tr.ReqID], tr.Spans, tr.Logs)
				}
			}
			if noise != wantNoise {
				t.Fatalf("received %d logs without a req_id; truth says %d", noise, wantNoise)
			}
		})
	}
}

func TestRunResources(t *testing.T) {
	s := startSink(t, true)
	endpoint := s.GRPCEndpoint
	cfg := Config{Scenarios: []Scenario{S1}, Affected: 0.5, Requests: 200, Seed: 3}
	if _, err := Run(context.Background(), cfg, Target{Endpoint: endpoint, Protocol: GRPC, Insecure: true}, nil); err != nil {
		t.Fatal(err)
	}
	instances := map[string]bool{}
	for _, td := range s.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			attrs := rs.Resource().Attributes()
			for _, k := range []string{"service.name", "service.instance.id", "host.name", "process.pid", "service.version"} {
				if _, ok := attrs.Get(k); !ok {
					t.Fatalf("resource %v lacks %s", attrs.AsRaw(), k)
				}
			}
			inst, _ := attrs.Get("service.instance.id")
			ver, _ := attrs.Get("service.version")
			svc, _ := attrs.Get("service.name")
			instances[inst.Str()+" "+ver.Str()] = true
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					// Every span names the request's model; an engine's own spans name the version it runs.
					if mv, ok := span.Attributes().Get(golden.ModelVer); ok && svc.Str() == "model" && mv.Str() != ver.Str() {
						t.Fatalf("model/forward of %s on a %s resource", mv.Str(), ver.Str())
					}
				}
			}
		}
	}
	// The upgraded engine is a new resource next to the old one it replaced.
	if !instances["model-3 "+baseModel] || !instances["model-3 "+upgradedModel] {
		t.Fatalf("want model-3 before and after the upgrade; got %v", instances)
	}
}

func TestRunReturnsExportError(t *testing.T) {
	endpoint := startRejectingHTTPSink(t, http.StatusBadRequest)
	cfg := Config{Scenarios: []Scenario{Healthy}, Requests: 5000, Seed: 1}
	sum, err := Run(context.Background(), cfg, Target{Endpoint: endpoint, Protocol: HTTP, Insecure: true}, nil)
	if err == nil {
		t.Fatal("Run returned no error although the receiver rejected every export")
	}
	if sum.Requests == cfg.Requests {
		t.Fatalf("Run went on for all %d requests after the first export failed", sum.Requests)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	s := startSink(t, false)
	endpoint := s.GRPCEndpoint
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cfg := Config{Scenarios: []Scenario{Healthy}, Duration: time.Hour, Rate: 2000, Seed: 1}
	sum, err := Run(ctx, cfg, Target{Endpoint: endpoint, Protocol: GRPC, Insecure: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if spans, logs := sinkCounts(s); sum.Requests == 0 || spans != sum.Spans || logs != sum.Logs {
		t.Fatalf("after cancel: summary %+v, sink %d spans %d logs", sum, spans, logs)
	}
}

func TestRunRate(t *testing.T) {
	s := startSink(t, false)
	endpoint := s.GRPCEndpoint
	const rate = 3000
	cfg := Config{Scenarios: []Scenario{Healthy}, Duration: time.Second, Rate: rate, Seed: 1}
	sum, err := Run(context.Background(), cfg, Target{Endpoint: endpoint, Protocol: GRPC, Insecure: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Loose: a loaded CI machine may lag, but the pacer must neither run
	// unthrottled nor stall.
	records := float64(sum.Spans + sum.Logs)
	if records < 0.5*rate || records > 1.2*rate {
		t.Fatalf("sent %v records in 1s at Rate %d", records, rate)
	}
}

func TestPacerDelay(t *testing.T) {
	p := pacer{rate: 1000}
	for _, c := range []struct {
		sent    int
		elapsed time.Duration
		want    time.Duration
	}{
		{0, 0, 0},
		{500, 0, 500 * time.Millisecond}, // ahead: wait until due
		{500, 200 * time.Millisecond, 300 * time.Millisecond},  // partly ahead
		{500, 500 * time.Millisecond, 0},                       // on time
		{500, 800 * time.Millisecond, -300 * time.Millisecond}, // behind: send now
	} {
		if got := p.delay(c.sent, c.elapsed); got != c.want {
			t.Errorf("delay(%d, %v) = %v, want %v", c.sent, c.elapsed, got, c.want)
		}
	}
	if got := (pacer{}).delay(1e6, 0); got > 0 {
		t.Errorf("unthrottled pacer waits %v", got)
	}
	// Sending at the due times hits the rate exactly: after n waits, n*batch records took n*batch/rate.
	var elapsed time.Duration
	sent := 0
	for range 100 {
		elapsed += max(0, p.delay(sent, elapsed))
		sent += 15
	}
	if want := time.Duration(99*15) * time.Millisecond; elapsed != want {
		t.Errorf("paced 100 requests of 15 records in %v, want %v", elapsed, want)
	}
}

// TestEmitterFidelity checks that the SDK sends exactly what the model says:
// ids, parents, names, kinds, timestamps, status, resource, trace context of logs.
func TestEmitterFidelity(t *testing.T) {
	s := startSink(t, true)
	em, err := newEmitter(context.Background(), Target{Endpoint: s.GRPCEndpoint, Protocol: GRPC, Insecure: true}, 64)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := NewGenerator(Config{Scenarios: []Scenario{S3}, Affected: 0.5, Requests: 50, Seed: 8})
	want := map[string]Span{}
	wantLogs := map[string]Log{} // by body and time
	for i := range 50 {
		r := g.Next(testEnd.Add(time.Duration(i) * time.Second))
		em.emit(r)
		for _, sp := range r.Spans {
			want[sp.Context.SpanID().String()] = sp
		}
		for _, l := range r.Logs {
			wantLogs[l.Body+l.Time.String()] = l
		}
	}
	if err := em.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, td := range s.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			host, _ := rs.Resource().Attributes().Get("host.name")
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					got++
					w, ok := want[span.SpanID().String()]
					switch {
					case !ok:
						t.Fatalf("span id %s is not the model's", span.SpanID())
					case span.TraceID().String() != w.Context.TraceID().String() || span.ParentSpanID().String() != w.Parent.SpanID().String() && w.Parent.IsValid():
						t.Fatalf("%s: trace %s parent %s, model says %s %s", w.Name, span.TraceID(), span.ParentSpanID(), w.Context.TraceID(), w.Parent.SpanID())
					case !w.Parent.IsValid() && !span.ParentSpanID().IsEmpty():
						t.Fatalf("root %s got parent %s", w.Name, span.ParentSpanID())
					case span.Name() != w.Name || int(span.Kind()) != int(w.Kind):
						t.Fatalf("span %s kind %v, model says %s kind %v", span.Name(), span.Kind(), w.Name, w.Kind)
					case !span.StartTimestamp().AsTime().Equal(w.Start) || !span.EndTimestamp().AsTime().Equal(w.End):
						t.Fatalf("%s: %v..%v, model says %v..%v", w.Name, span.StartTimestamp(), span.EndTimestamp(), w.Start, w.End)
					case (span.Status().Message() != "") != (w.Error != "") || span.Status().Message() != w.Error:
						t.Fatalf("%s: status %q, model says %q", w.Name, span.Status().Message(), w.Error)
					case host.Str() != w.Service.Host:
						t.Fatalf("%s: host %s, model says %s", w.Name, host.Str(), w.Service.Host)
					case span.Attributes().Len() != len(w.Attrs):
						t.Fatalf("%s: %d attributes, model says %d", w.Name, span.Attributes().Len(), len(w.Attrs))
					}
				}
			}
		}
	}
	if got != len(want) {
		t.Fatalf("received %d spans, modelled %d", got, len(want))
	}
	for _, ld := range s.Logs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, rec := range sl.LogRecords().All() {
					w, ok := wantLogs[rec.Body().Str()+rec.Timestamp().AsTime().String()]
					if !ok {
						t.Fatalf("log %q at %v is not the model's", rec.Body().Str(), rec.Timestamp())
					}
					if rec.SpanID().String() != w.Context.SpanID().String() && w.Context.IsValid() || !w.Context.IsValid() && !rec.SpanID().IsEmpty() {
						t.Fatalf("log %q: span %s, model says %v", w.Body, rec.SpanID(), w.Context.SpanID())
					}
					if !rec.Timestamp().AsTime().Equal(w.Time) || rec.SeverityText() != w.SeverityText || int(rec.SeverityNumber()) != int(w.Severity) {
						t.Fatalf("log %q: %v %s, model says %v %s", w.Body, rec.Timestamp(), rec.SeverityText(), w.Time, w.SeverityText)
					}
				}
			}
		}
	}
}
