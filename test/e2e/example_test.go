//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/otlpsink"
)

// exampleDir is the FastAPI example: a service and the model server it calls.
var exampleDir = filepath.Join(repoRoot, "examples", "inference-service")

// The example model server's versions (model_server.py defaults): the canary
// fails every request with --fail-canary.
const (
	stableVersion = "llama3-8b-v2.1.4"
	canaryVersion = "llama3-8b-v2.2.0"
)

// examplePython is the venv `make example-venv` builds from the example's
// pinned requirements, or $LOOM_EXAMPLE_PYTHON.
func examplePython(t *testing.T) string {
	t.Helper()
	python := os.Getenv("LOOM_EXAMPLE_PYTHON")
	if python == "" {
		python = filepath.Join(exampleDir, ".venv", "bin", "python")
	}
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the example's Python (%s) is missing: run make example-venv (make e2e does), or set LOOM_EXAMPLE_PYTHON", python)
	}
	return python
}

// pyProcess is one of the example's Python programs.
type pyProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    *syncBuffer
	stdout *syncBuffer // the service's JSON log lines, apart from stderr
	exited chan struct{}
	port   int
	done   bool
}

// startPython runs script from the example with --port 0 and waits until it
// says which port it listens on.
func startPython(t *testing.T, python, script string, env []string, args ...string) *pyProcess {
	t.Helper()
	portFile := filepath.Join(t.TempDir(), "port")
	p := &pyProcess{t: t, out: &syncBuffer{}, stdout: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(python, append([]string{script, "--port", "0", "--port-file", portFile}, args...)...)
	p.cmd.Dir = exampleDir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.stop)
	deadline := time.Now().Add(2 * time.Minute) // importing the SDK and instrumentations is slow on a loaded machine
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			t.Fatalf("%s exited during start-up:\n%s", script, p.out)
		default:
		}
		if raw, err := os.ReadFile(portFile); err == nil && len(raw) > 0 {
			if p.port, err = strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not start within 2 minutes:\n%s", script, p.out)
	return nil
}

// stop sends SIGTERM (the service then flushes its telemetry) and waits.
func (p *pyProcess) stop() {
	if p.done {
		return
	}
	p.done = true
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("%s did not stop within 30s of SIGTERM:\n%s", p.cmd.Args[1], p.out)
	}
}

// exampleRequest is one request to the service and what it answered.
type exampleRequest struct {
	reqID, prompt, modelVer string
	status                  int
}

const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"

// driveService sends n requests; half bring their own X-Request-ID, the
// rest get one from the service. Every prompt carries a marker that must
// never leave the collector.
func driveService(t *testing.T, port, n int) []exampleRequest {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	var out []exampleRequest
	for i := range n {
		r := exampleRequest{prompt: fmt.Sprintf("RAW-PROMPT-%03d please summarize the incident report for cluster %d", i, rand.IntN(1000))}
		body, _ := json.Marshal(map[string]string{"prompt": r.prompt})
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/generate", port), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		sent := ""
		if i%2 == 0 {
			suffix := make([]byte, 6)
			for j := range suffix {
				suffix[j] = alnum[rand.IntN(len(alnum))]
			}
			sent = fmt.Sprintf("req-%d-%s", time.Now().UnixMilli(), suffix)
			req.Header.Set("X-Request-ID", sent)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		var answer struct {
			ReqID    string `json:"req_id"`
			ModelVer string `json:"model_ver"`
		}
		err = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		r.reqID, r.modelVer, r.status = resp.Header.Get("X-Request-ID"), answer.ModelVer, resp.StatusCode
		switch {
		case sent != "" && r.reqID != sent:
			t.Fatalf("request %d sent X-Request-ID %s, got %s back", i, sent, r.reqID)
		case answer.ReqID != r.reqID:
			t.Fatalf("request %d: body says req_id %s, header %s", i, answer.ReqID, r.reqID)
		}
		if _, ok := golden.ParseReqID(r.reqID); !ok {
			t.Fatalf("request %d: %q is not in the default req_id format", i, r.reqID)
		}
		out = append(out, r)
	}
	return out
}

// emittedLogs counts, per req_id, the JSON log lines the service wrote to
// stdout: the same records it sent through the logging bridge.
func emittedLogs(t *testing.T, stdout string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			t.Fatalf("the service wrote a line that is not JSON: %q", sc.Text())
		}
		if id, ok := line["req_id"].(string); ok {
			counts[id]++
		}
	}
	return counts
}

// exportedRequest is what came out of the collector for one req_id.
type exportedRequest struct {
	logs  []plog.LogRecord
	spans []ptrace.Span
}

func exportedByReqID(sink *otlpsink.Sink) map[string]*exportedRequest {
	out := map[string]*exportedRequest{}
	get := func(attrs pcommon.Map) *exportedRequest {
		id := strAttr(attrs, golden.ReqID)
		if out[id] == nil {
			out[id] = &exportedRequest{}
		}
		return out[id]
	}
	for _, ld := range sink.Logs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
					lr := sls.At(j).LogRecords().At(k)
					r := get(lr.Attributes())
					r.logs = append(r.logs, lr)
				}
			}
		}
	}
	for _, td := range sink.Traces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					span := sss.At(j).Spans().At(k)
					r := get(span.Attributes())
					r.spans = append(r.spans, span)
				}
			}
		}
	}
	return out
}

// The spans of one request: the service's own, both instrumentations' LLM
// spans, and the detached work in new traces. FastAPI adds spans of its own
// (its server span, fastapi.endpoint, ...), which must be there too.
var (
	healthySpans = []string{"POST /v1/generate", "preproc.normalize", "preproc.tokenize", "openai.chat", "ChatCompletion", "cache.write", "audit.write"}
	failingSpans = []string{"POST /v1/generate", "preproc.normalize", "preproc.tokenize", "openai.chat", "ChatCompletion", "audit.write"}
	detached     = []string{"cache.write", "audit.write"}
)

// exampleRun is the example service's traffic through the default config.
type exampleRun struct {
	requests []exampleRequest
	emitted  map[string]int
	exported map[string]*exportedRequest
	sink     *otlpsink.Sink
	col      *collector
}

// runExample drives the example service, with the canary failing, through
// the default config: half of the healthy requests kept by the base rate,
// the failing ones by the errors policy.
func runExample(t *testing.T) exampleRun {
	t.Helper()
	python := examplePython(t)
	sink := startSink(t)
	col := startCollector(t, "distribution/config.yaml", withEdits(exportTo(sink, "logs", "traces"), func(cfg map[string]any) {
		sampling := mapAt(cfg, "processors", "reqsampling")
		sampling["base_percentage"] = 50
		sampling["decision_wait"] = "2s"
	}))
	model := startPython(t, python, "model_server.py", nil, "--fail-canary", "--canary-share", "0.3", "--latency-ms", "5")
	svc := startPython(t, python, "service.py", []string{
		fmt.Sprintf("MODEL_SERVER_URL=http://127.0.0.1:%d/v1", model.port),
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.endpoints["receivers.otlp.protocols.http.endpoint"],
		"OTEL_BSP_SCHEDULE_DELAY=200", "OTEL_BLRP_SCHEDULE_DELAY=200",
	})
	requests := driveService(t, svc.port, 80)
	svc.stop()
	model.stop()
	if strings.Contains(svc.out.String(), "Failed to export") {
		t.Fatalf("the service could not export to the collector:\n%s", svc.out)
	}
	waitQuiet(sink, 5*time.Second)
	return exampleRun{requests: requests, emitted: emittedLogs(t, svc.stdout.String()), exported: exportedByReqID(sink), sink: sink, col: col}
}

func spanNames(spans []ptrace.Span) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	slices.Sort(names)
	return names
}

// TestExampleServiceThroughTheCollector sends the FastAPI example's real
// telemetry (OpenTelemetry SDK, structlog through the logging bridge,
// OpenLLMetry and OpenInference spans) through the built collector, and asks
// its rca page for the cause: the canary version, first.
func TestExampleServiceThroughTheCollector(t *testing.T) {
	run := runExample(t)
	var failing, healthyKept int
	for _, r := range run.requests {
		// The ground truth of the injected cause: the canary version fails
		// every request routed to it, and only those.
		if (r.status == http.StatusBadGateway) != (r.modelVer == canaryVersion) || r.status != http.StatusOK && r.status != http.StatusBadGateway {
			t.Fatalf("%s: HTTP %d from %s: the canary and only the canary must fail", r.reqID, r.status, r.modelVer)
		}
		got := run.exported[r.reqID]
		failed := r.status != http.StatusOK
		if failed {
			failing++
		}
		if got == nil {
			if failed {
				t.Errorf("failing request %s: nothing exported; failing requests are kept", r.reqID)
			}
			continue
		}
		if !failed {
			healthyKept++
		}
		// Kept whole: every log line the service wrote and every span, the
		// LLM spans (which carry no req_id of their own) and the detached
		// work in new traces included.
		if len(got.logs) != run.emitted[r.reqID] {
			t.Errorf("%s (HTTP %d): %d log records exported, the service wrote %d", r.reqID, r.status, len(got.logs), run.emitted[r.reqID])
		}
		want := healthySpans
		if failed {
			want = failingSpans
		}
		names := spanNames(got.spans)
		for _, name := range want {
			if !slices.Contains(names, name) {
				t.Errorf("%s (HTTP %d): no %s span among %v", r.reqID, r.status, name, names)
			}
		}
		if !failed && !slices.Contains(names, "cache.write") || slices.Contains(names, "cache.write") && failed {
			t.Errorf("%s (HTTP %d): spans %v", r.reqID, r.status, names)
		}
		checkDetached(t, r, got)
		checkGoldenFields(t, r, got)
	}
	if failing == 0 || failing == len(run.requests) {
		t.Fatalf("%d of %d requests failed: the mix needs both", failing, len(run.requests))
	}
	if healthyKept == 0 {
		t.Errorf("no healthy request kept at a 50%% base rate")
	}
	if unknown := run.exported[""]; unknown != nil {
		// uvicorn's start-up and shutdown lines belong to no request
		for _, lr := range unknown.logs {
			if strings.Contains(lr.Body().AsString(), "RAW-PROMPT") || lr.TraceID() != (pcommon.TraceID{}) {
				t.Errorf("a record of a request was exported without its req_id: %s", lr.Body().AsString())
			}
		}
		if len(unknown.spans) > 0 {
			t.Errorf("%d spans exported without a req_id, e.g. %s", len(unknown.spans), unknown.spans[0].Name())
		}
	}
	// The page names the injected cause: the canary version, first.
	ranking := rankAfterDecisions(t, run.col, failing)
	if rank := ranking.rankOf(golden.ModelVer, canaryVersion); rank != 1 {
		t.Errorf("the root-cause ranking puts model_ver=%s at %d, want 1:%s", canaryVersion, rank, ranking)
	}
	t.Logf("%d requests, %d failing (all on %s), %d healthy kept; the ranking:%s", len(run.requests), failing, canaryVersion, healthyKept, ranking)
}

// checkDetached: the background work runs in new traces, linked to its
// request's trace; everything else is in the request's trace.
func checkDetached(t *testing.T, r exampleRequest, got *exportedRequest) {
	t.Helper()
	var root pcommon.TraceID
	for _, s := range got.spans {
		if strAttr(s.Attributes(), golden.Stage) == "gateway/request" {
			root = s.TraceID()
		}
	}
	for _, s := range got.spans {
		if !slices.Contains(detached, s.Name()) {
			if s.TraceID() != root {
				t.Errorf("%s: span %s is not in the request's trace", r.reqID, s.Name())
			}
			continue
		}
		if s.TraceID() == root {
			t.Errorf("%s: detached span %s is in the request's trace", r.reqID, s.Name())
		}
		linked := false
		for i := 0; i < s.Links().Len(); i++ {
			linked = linked || s.Links().At(i).TraceID() == root
		}
		if !linked {
			t.Errorf("%s: detached span %s does not link to its request", r.reqID, s.Name())
		}
	}
}

// checkGoldenFields: the model call's log record carries all five golden
// fields, and the LLM spans the model version and token counts mapped from
// their libraries' conventions.
func checkGoldenFields(t *testing.T, r exampleRequest, got *exportedRequest) {
	t.Helper()
	forward := 0
	for _, lr := range got.logs {
		a := lr.Attributes()
		if strAttr(a, golden.Stage) != "model/forward" {
			continue
		}
		forward++
		for _, k := range []string{golden.ReqID, golden.Stage, golden.InputHash, golden.ModelVer, golden.LatencyMs} {
			if strAttr(a, k) == "" {
				t.Errorf("%s: model/forward record lacks %s: %v", r.reqID, k, a.AsRaw())
			}
		}
		if v, _ := a.Get(golden.ValidAttr); !v.Bool() {
			t.Errorf("%s: model/forward record is not golden-valid: %v", r.reqID, a.AsRaw())
		}
		if strAttr(a, golden.ModelVer) != r.modelVer {
			t.Errorf("%s: model/forward says model_ver %s, the service answered %s", r.reqID, strAttr(a, golden.ModelVer), r.modelVer)
		}
	}
	if forward != 1 {
		t.Errorf("%s: %d model/forward records, want 1", r.reqID, forward)
	}
	for _, s := range got.spans {
		if s.Name() != "openai.chat" && s.Name() != "ChatCompletion" {
			continue
		}
		a := s.Attributes()
		if r.status != http.StatusOK {
			if s.Status().Code() != ptrace.StatusCodeError {
				t.Errorf("%s: %s of a failed call has status %s", r.reqID, s.Name(), s.Status().Code())
			}
			continue
		}
		if got := strAttr(a, golden.ModelVer); got != stableVersion {
			t.Errorf("%s: %s has model_ver %q, want the answering model %s", r.reqID, s.Name(), got, stableVersion)
		}
		for _, k := range []string{golden.InputTokens, golden.OutputTokens, golden.TotalTokens} {
			if v, ok := a.Get(k); !ok || v.Type() != pcommon.ValueTypeInt {
				t.Errorf("%s: %s lacks the number %s: %v", r.reqID, s.Name(), k, a.AsRaw())
			}
		}
	}
}
