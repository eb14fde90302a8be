package reqsamplingprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzConsume sends arbitrary OTLP payloads through both processors of a
// sampler: bad input is grouped, decided and released, never a panic.
func FuzzConsume(f *testing.F) {
	for _, seed := range []plog.Logs{logsOf(rec{reqID: "req-1", inputHash: "f7a1b2c3", severity: plog.SeverityNumberError}), logsOf(rec{traceID: 3})} {
		b, _ := (&plog.ProtoMarshaler{}).MarshalLogs(seed)
		f.Add(false, b)
	}
	td, _ := requests(3, nil)
	b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	f.Add(true, b)

	cfg := defaultConfig()
	cfg.BasePercentage = 50
	cfg.MaxRequests = 100
	h := newHarness(f, cfg)
	f.Fuzz(func(t *testing.T, spans bool, payload []byte) {
		ctx := context.Background()
		if spans {
			td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(payload)
			if err != nil {
				return
			}
			_ = h.traces.ConsumeTraces(ctx, td)
		} else {
			ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(payload)
			if err != nil {
				return
			}
			_ = h.logs.ConsumeLogs(ctx, ld)
		}
		h.wait(time.Minute)
		h.logSink.Reset()
		h.traceSink.Reset()
	})
}
