package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The digests of TestOutputPinned. Update them only with a change that means to
// alter loomgen's traffic, and say so in its commit message.
const (
	pinnedTraces = "d3ca5c72162daa77d92f15473edb51ebd2c786fb6b4b1c3050b92253b916fe7f"
	pinnedLogs   = "72952d518b1ab5629b43cde08235b21d7f08960500b62da098ce626675c92cfc"
	pinnedTruth  = "a9a7cf83cca5adf99f5c91c39d76db34a1733a201a5ea205041d0895fa94d86c"
)

// TestOutputPinned pins what the loom family generates, every scenario mixed,
// as the OTLP protobuf of its spans and logs and its ground-truth lines: a
// refactor of the request model, the pdata conversion or the Truth type must
// leave all three byte for byte the same.
func TestOutputPinned(t *testing.T) {
	reqs, _ := generate(t, Config{Scenarios: []Scenario{S1, S2, S3, HotInputs}, Affected: 0.3, Seed: 99}, 1500)
	td, ld := ToPdata(reqs)
	traces, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	truth := sha256.New()
	enc := json.NewEncoder(truth)
	for _, r := range reqs {
		if err := enc.Encode(&r.Truth); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ what, got, want string }{
		{"traces", digest(traces), pinnedTraces},
		{"logs", digest(logs), pinnedLogs},
		{"truth", hex.EncodeToString(truth.Sum(nil)), pinnedTruth},
	} {
		if c.got != c.want {
			t.Errorf("the %s of the pinned run changed: sha256 %s, pinned %s", c.what, c.got, c.want)
		}
	}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
