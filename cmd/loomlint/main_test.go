package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lint(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	rc := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return rc, stdout.String(), stderr.String()
}

func jsonReport(t *testing.T, args ...string) (int, report) {
	t.Helper()
	rc, out, errOut := lint(t, append([]string{"-json"}, args...)...)
	require.NotEqual(t, 2, rc, errOut)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return rc, rep
}

func service(t *testing.T, rep report, name string) serviceReport {
	t.Helper()
	for _, s := range rep.Services {
		if s.Service == name {
			return s
		}
	}
	t.Fatalf("no service %s in %+v", name, rep.Services)
	return serviceReport{}
}

// The example service's stdout (examples/inference-service/capture_logs.sh):
// it keeps the contract, and passes.
func TestTheExampleServicePasses(t *testing.T) {
	rc, out, _ := lint(t, "testdata/service.jsonl")
	assert.Equal(t, 0, rc, out)
	assert.Contains(t, out, "PASS: 96 records")
	assert.Contains(t, out, "model/forward")

	_, rep := jsonReport(t, "testdata/service.jsonl")
	s := service(t, rep, "inference-api")
	assert.Equal(t, 96, s.Records)
	assert.Zero(t, s.RawPrompts)
	assert.Empty(t, s.Invalid)
	assert.GreaterOrEqual(t, s.Coverage["req_id"], 0.9)
	for _, st := range s.Stages {
		if st.Stage == "model/forward" {
			assert.Equal(t, st.Records, st.Valid, "every model call's record carries the golden five")
		}
	}
}

// Its broken variant (EXAMPLE_LOG_CONTRACT=broken) loses req_id on the
// stage records, logs the raw prompt and writes a latency as text.
func TestTheBrokenVariantFails(t *testing.T) {
	rc, out, _ := lint(t, "testdata/service-broken.jsonl")
	assert.Equal(t, 1, rc, out)
	assert.Contains(t, out, "FAIL: inference-api: req_id on 25.0% of records")
	assert.Contains(t, out, "12 records carry raw prompts")

	_, rep := jsonReport(t, "testdata/service-broken.jsonl")
	s := service(t, rep, "inference-api")
	assert.Equal(t, 12, s.RawPrompts)
	assert.Equal(t, 12, s.Invalid["resource_usage.*"], "latency_ms=\"0.1ms\" is no number")
	assert.Len(t, rep.Failures, 3)

	rc, _, _ = lint(t, "-min-coverage", "req_id=0.2", "-max-noise", "100", "-max-raw-prompts", "12", "testdata/service-broken.jsonl")
	assert.Equal(t, 0, rc, "thresholds are the caller's")
}

// OTLP JSON as the file exporter writes it: one export request per line.
func TestOTLPJSONLines(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "internal", "golden", "testdata", "conventions", "openllmetry-0.62.4.json"))
	require.NoError(t, err)
	var line bytes.Buffer
	require.NoError(t, json.Compact(&line, raw))
	path := filepath.Join(t.TempDir(), "traces.json")
	require.NoError(t, os.WriteFile(path, append(line.Bytes(), '\n'), 0o600))

	rc, rep := jsonReport(t, path)
	assert.Equal(t, 1, rc, "LLM spans carry no req_id of their own")
	s := service(t, rep, "capture")
	assert.Equal(t, 2, s.Records)
	assert.Equal(t, 2, s.Present["model_ver"], "gen_ai.response.model / gen_ai.request.model")
	assert.Equal(t, 1, s.Present["resource_usage.*"], "the answered call's token counts")
}

// -config applies a collector config's goldenfield settings.
func TestCollectorConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("processors:\n  goldenfield/strict:\n    validation:\n      required: [level]\n    normalize:\n      aliases:\n        event: stage\n"), 0o600))
	_, rep := jsonReport(t, "-config", cfg, "-processor", "goldenfield/strict", "testdata/service.jsonl")
	s := service(t, rep, "inference-api")
	assert.Equal(t, 96, s.Present["stage"], "event is now an alias of stage")

	rc, _, errOut := lint(t, "-config", cfg, "testdata/service.jsonl")
	assert.Equal(t, 2, rc)
	assert.Contains(t, errOut, "no processors::goldenfield")

	rc, _, _ = lint(t, "-config", filepath.Join("..", "..", "distribution", "config.yaml"), "testdata/service.jsonl")
	assert.Equal(t, 0, rc, "the default collector config's goldenfield")
}

func TestPlainTextAndLogfmtFromStandardInput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	in := "level=info req_id=req-1715234890123-a1b2c3 stage=model/forward model_ver=llama3-8b-v2.1.4 latency_ms=812 input_hash=a1b2c3d4\n" +
		"[req-1715234890123-a1b2c3] tokenized stage=preproc/tokenize tokens=12\n" +
		"received request\n"
	rc := run(context.Background(), []string{"-json", "-service", "gateway", "-"}, strings.NewReader(in), &stdout, &stderr)
	require.NotEqual(t, 2, rc, stderr.String())
	var rep report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	s := service(t, rep, "gateway")
	assert.Equal(t, 3, s.Records)
	assert.Equal(t, 2, s.Present["req_id"])
	assert.Equal(t, 1, s.Valid)
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-min-coverage", "req_id=2", "x"},
		{"-min-coverage", "colour=0.5", "x"},
		{"no-such-file"},
	} {
		rc, _, _ := lint(t, args...)
		assert.Equal(t, 2, rc, "%v", args)
	}
}
