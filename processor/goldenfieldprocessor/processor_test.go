package goldenfieldprocessor

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/loom-otel/loom/internal/golden"
)

// The pipeline calls a processor from several goroutines at once; its logs and
// traces instances share the drift tracker.
func TestConcurrentConsume(t *testing.T) {
	f := NewFactory()
	logsSink, tracesSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	lp, err := f.CreateLogs(context.Background(), settings(nil), defaultConfig(), logsSink)
	require.NoError(t, err)
	tp, err := f.CreateTraces(context.Background(), settings(nil), defaultConfig(), tracesSink)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				r := s1Request(g*1000 + i)[0]
				assert.NoError(t, lp.ConsumeLogs(context.Background(), makeLogs(t, r)))
				assert.NoError(t, tp.ConsumeTraces(context.Background(), makeTraces(t, rec{service: "model", attrs: goldenAttrs()})))
			}
		})
	}
	wg.Wait()
	require.NoError(t, lp.Shutdown(context.Background()))
	require.NoError(t, tp.Shutdown(context.Background()))
	// S1's records change model version: whether the tracker has seen enough
	// of both versions to report a schema drift depends on how the
	// goroutines interleave, so drift records are counted apart.
	records, drifts := 0, 0
	for _, lr := range logRecords(logsSink.AllLogs()) {
		if lr.EventName() == golden.SchemaDriftEvent {
			drifts++
			continue
		}
		records++
		assert.Contains(t, lr.Attributes().AsRaw(), golden.ValidAttr)
	}
	assert.Equal(t, 200, records)
	assert.LessOrEqual(t, drifts, 1, "one drift (v2.3.1 to v2.3.2) at most")
	assert.Equal(t, 200, tracesSink.SpanCount())
}
