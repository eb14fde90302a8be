package goldenfieldprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadatatest"
)

// A log record without a severity number leaves with the one its severity
// text or its body shows, and the processor counts where it was read from.
func TestSeverityFromTextAndBody(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), defaultConfig(), sink)
	require.NoError(t, err)
	text := func(s string) func(plog.LogRecord) { return func(lr plog.LogRecord) { lr.SetSeverityText(s) } }
	number := func(lr plog.LogRecord) { lr.SetSeverityNumber(plog.SeverityNumberInfo) }
	require.NoError(t, p.ConsumeLogs(context.Background(), makeLogs(t,
		rec{body: "2024-05-01 12:00:00,123 - store - ERROR - shard is read-only"},
		rec{body: `{"event":"request aborted","level":"error"}`},
		rec{body: "Traceback (most recent call last):\n  File \"x.py\""},
		rec{body: "request done, no error"},
		rec{body: "ERROR in the body", mutateLog: text("warning")},
		rec{body: "ERROR in the body", mutateLog: text("custom")},
		rec{body: "ERROR in the body", mutateLog: number},
	)))
	var got []plog.SeverityNumber
	var texts []string
	for _, ld := range sink.AllLogs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, lr := range rl.ScopeLogs().At(0).LogRecords().All() {
				got, texts = append(got, lr.SeverityNumber()), append(texts, lr.SeverityText())
			}
		}
	}
	assert.Equal(t, []plog.SeverityNumber{plog.SeverityNumberError, plog.SeverityNumberError, plog.SeverityNumberError, 0,
		plog.SeverityNumberWarn, 0, plog.SeverityNumberInfo}, got)
	assert.Equal(t, []string{"ERROR", "ERROR", "ERROR", "", "warning", "custom", ""}, texts, "a text of the record's own is kept")

	metadatatest.AssertEqualProcessorGoldenfieldSeverityParsed(t, tel, []metricdata.DataPoint[int64]{
		{Value: 3, Attributes: attribute.NewSet(attribute.String("source", "body"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("source", "severity_text"))},
	}, metricdatatest.IgnoreTimestamp())
	require.NoError(t, p.Shutdown(context.Background()))
}
