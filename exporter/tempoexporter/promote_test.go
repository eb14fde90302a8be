package tempoexporter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

// testTraces has two resources: one carrying the request's golden fields (as a
// per-request worker process would), one without.
func testTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "model")
	rs.Resource().Attributes().PutStr(golden.ReqID, "req-1715234890123-a1b2c3")
	rs.Resource().Attributes().PutStr(golden.ModelVer, "llama3-8b-v2.1.4")
	rs.Resource().Attributes().PutInt(golden.GPUMemMb, 12450)
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	spans.AppendEmpty().SetName("forward")
	own := spans.AppendEmpty()
	own.SetName("decode")
	own.Attributes().PutStr(golden.ModelVer, "lora-adapter-v3")

	other := td.ResourceSpans().AppendEmpty()
	other.Resource().Attributes().PutStr("service.name", "gateway")
	other.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("route")
	return td
}

func TestPromoteGoldenFields(t *testing.T) {
	td := testTraces()
	assert.Equal(t, int64(5), promoteGoldenFields(td))

	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	assert.Equal(t, map[string]any{
		golden.ReqID:    "req-1715234890123-a1b2c3",
		golden.ModelVer: "llama3-8b-v2.1.4",
		golden.GPUMemMb: int64(12450),
	}, spans.At(0).Attributes().AsRaw())
	assert.Equal(t, "lora-adapter-v3", spans.At(1).Attributes().AsRaw()[golden.ModelVer], "a span's own value wins")
	assert.Empty(t, td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw())
	_, onResource := td.ResourceSpans().At(0).Resource().Attributes().Get(golden.ReqID)
	assert.True(t, onResource, "the resource keeps its attributes")
}

func BenchmarkPromoteGoldenFields(b *testing.B) {
	td := benchTraces()
	for b.Loop() {
		promoteGoldenFields(td) // after the first run: lookups only, as for spans that carry the fields
	}
	b.ReportMetric(float64(td.SpanCount()*b.N)/b.Elapsed().Seconds(), "records/s")
}
