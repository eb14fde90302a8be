package golden

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestRequestKey(t *testing.T) {
	trace := pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", TraceKey(trace), "as W3C traceparent writes it")
	assert.True(t, IsTraceKey(TraceKey(trace)))

	key, byTrace := RequestKey("req-1", trace)
	assert.Equal(t, "req-1", key)
	assert.False(t, byTrace)
	key, byTrace = RequestKey("", trace)
	assert.Equal(t, TraceKey(trace), key)
	assert.True(t, byTrace)
	key, byTrace = RequestKey(strings.Repeat("x", MaxReqIDBytes+1), trace)
	assert.Equal(t, TraceKey(trace), key, "an id no request can have is no key")
	assert.True(t, byTrace)
	key, _ = RequestKey("", pcommon.TraceID{})
	assert.Empty(t, key)

	for _, id := range []string{"", "4BF92F3577B34DA6A3CE929D0E0E4736", "4bf92f3577b34da6a3ce929d0e0e473", "00000000000000000000000000000000", "req-1715234890123-a1b2c3"} {
		assert.False(t, IsTraceKey(id), id)
	}
}
