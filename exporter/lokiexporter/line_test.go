package lokiexporter

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func sampleAttrs() []attr {
	status := pcommon.NewValueInt(503)
	route := pcommon.NewValueStr("/v1/chat completions")
	return []attr{{"http.status", status}, {"route", route}}
}

func TestAppendLineJSON(t *testing.T) {
	body := pcommon.NewValueMap()
	body.Map().PutStr("msg", "timeout \"upstream\"\n")
	body.Map().PutDouble("nan", math.NaN())
	body.Map().PutEmptyBytes("raw").FromRaw([]byte{1, 2})
	body.Map().PutEmptySlice("xs").AppendEmpty().SetBool(true)
	line := appendLine(nil, LineFormatJSON, body, sampleAttrs())

	var got map[string]any
	require.NoError(t, json.Unmarshal(line, &got), string(line))
	assert.Equal(t, map[string]any{
		"body":        map[string]any{"msg": "timeout \"upstream\"\n", "nan": "NaN", "raw": "AQI=", "xs": []any{true}},
		"http.status": 503.0,
		"route":       "/v1/chat completions",
	}, got)
}

func TestAppendLineJSONInvalidUTF8(t *testing.T) {
	line := appendLine(nil, LineFormatJSON, pcommon.NewValueStr("bad \xff\x00 byte"), nil)
	require.True(t, json.Valid(line), string(line))
	assert.Equal(t, `{"body":"bad `+"\uFFFD"+`\u0000 byte"}`, string(line))
}

func TestAppendLineLogfmt(t *testing.T) {
	line := appendLine(nil, LineFormatLogfmt, pcommon.NewValueStr("model loaded"), sampleAttrs())
	assert.Equal(t, `body="model loaded" http.status=503 route="/v1/chat completions"`, string(line))

	empty := appendLine(nil, LineFormatLogfmt, pcommon.NewValueEmpty(), []attr{{"a=b c", pcommon.NewValueStr("")}})
	assert.Equal(t, `a_b_c=""`, string(empty), "keys are made safe and empty values quoted")
}

func TestAppendLineRaw(t *testing.T) {
	assert.Equal(t, "plain \uFFFD text", string(appendLine(nil, LineFormatRaw, pcommon.NewValueStr("plain \xff text"), sampleAttrs())))
	assert.Equal(t, "42", string(appendLine(nil, LineFormatRaw, pcommon.NewValueInt(42), nil)))
}

func TestFitLine(t *testing.T) {
	short := []byte("short")
	assert.Equal(t, "short", string(fitLine(short, 100)))

	long := []byte(strings.Repeat("é", 100)) // 200 bytes of 2-byte runes
	got := fitLine(long, 51)
	assert.LessOrEqual(t, len(got), 51)
	assert.True(t, utf8.Valid(got))
	assert.True(t, strings.HasSuffix(string(got), truncationMarker))
}

func BenchmarkAppendLine(b *testing.B) {
	body := pcommon.NewValueStr("preproc normalize done for request req-1715234890123-a1b2c3 in 12ms")
	attrs := sampleAttrs()
	for _, format := range []LineFormat{LineFormatJSON, LineFormatLogfmt, LineFormatRaw} {
		b.Run(string(format), func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf = appendLine(buf[:0], format, body, attrs)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(len(buf)), "B/record")
		})
	}
}
