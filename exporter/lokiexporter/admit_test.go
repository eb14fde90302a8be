package lokiexporter

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/exporter/lokiexporter/internal/metadatatest"
)

// sentLogRecords reads exporterhelper's own otelcol_exporter_sent_log_records.
func sentLogRecords(t *testing.T, tt *componenttest.Telemetry) int64 {
	t.Helper()
	m, err := tt.GetMetric("otelcol_exporter_sent_log_records")
	require.NoError(t, err)
	var sent int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		sent += dp.Value
	}
	return sent
}

func entriesOf(pushes []received) []string {
	var lines []string
	for _, p := range pushes {
		for _, s := range p.req.Streams {
			for _, e := range s.Entries {
				lines = append(lines, e.Line)
			}
		}
	}
	return lines
}

func assertDropped(t *testing.T, tt *componenttest.Telemetry, want map[string]int64) {
	t.Helper()
	var points []metricdata.DataPoint[int64]
	for reason, n := range want {
		points = append(points, metricdata.DataPoint[int64]{Value: n, Attributes: attribute.NewSet(attribute.String("drop_reason", reason))})
	}
	metadatatest.AssertEqualExporterLokiRecordsDropped(t, tt, points, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// TestOversizedRecordDoesNotDropItsBatch: exporterhelper's batcher drops a whole
// batch when one record is larger than sending_queue::batch::max_size. Only the
// oversized record is truncated or dropped, per line::on_too_long, and counted.
func TestOversizedRecordDoesNotDropItsBatch(t *testing.T) {
	const batchMax = 256 << 10
	huge := strings.Repeat("x", 1<<20)
	manyLarge := func(lr plog.LogRecord) { // each value cut to 64 KiB is still too much for a batch
		for i := range 5 {
			lr.Attributes().PutStr(fmt.Sprintf("blob%d", i), strings.Repeat("y", 100<<10))
		}
	}
	for _, tc := range []struct {
		onTooLong   OnTooLong
		wantLines   int
		wantDropped map[string]int64
		truncated   int64
	}{
		{OnTooLongTruncate, 11, map[string]int64{dropRecordTooLarge: 1}, 1},
		{OnTooLongDrop, 10, map[string]int64{dropLineTooLong: 2}, 0},
	} {
		t.Run(string(tc.onTooLong), func(t *testing.T) {
			loki := &fakeLoki{t: t}
			cfg := testConfig()
			cfg.RetryConfig.Enabled = false
			batch := cfg.QueueConfig.Get().Batch.Get()
			batch.MinSize, batch.MaxSize = 0, batchMax
			cfg.Line.MaxSize = 1024
			cfg.Line.OnTooLong = tc.onTooLong
			exp, tt := newTestExporter(t, cfg, loki)

			var records []func(plog.LogRecord)
			for i := range 10 {
				records = append(records, goldenRecord(fmt.Sprintf("req-1715234890123-%06d", i), testNow))
				if i == 4 {
					records = append(records, func(lr plog.LogRecord) { lr.Body().SetStr(huge) }, manyLarge)
				}
			}
			ld := testLogs(records...)
			require.True(t, exp.Capabilities().MutatesData, "the batcher mutates, so the pipeline hands the exporter its own copy")
			require.NoError(t, exp.ConsumeLogs(context.Background(), ld))
			require.NoError(t, exp.Shutdown(context.Background()), "Shutdown flushes the queue")

			lines := entriesOf(loki.received())
			assert.Len(t, lines, tc.wantLines)
			for _, line := range lines {
				assert.LessOrEqual(t, len(line), cfg.Line.MaxSize)
			}
			assert.Equal(t, int64(tc.wantLines), sentLogRecords(t, tt))
			assertDropped(t, tt, tc.wantDropped)
			if tc.truncated > 0 {
				metadatatest.AssertEqualExporterLokiLinesTruncated(t, tt, []metricdata.DataPoint[int64]{{Value: tc.truncated}}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
			}
		})
	}
}

// TestDroppedRecordsAreNotCountedAsSent: exporterhelper counts every record of a
// push that returns nil as sent; records dropped by policy never reach a push.
func TestDroppedRecordsAreNotCountedAsSent(t *testing.T) {
	loki := &fakeLoki{t: t}
	cfg := synchronous(testConfig())
	cfg.Line.MaxSize = 1024
	cfg.Line.OnTooLong = OnTooLongDrop
	exp, tt := newTestExporter(t, cfg, loki)
	ld := testLogs(
		goldenRecord("req-1715234890123-a1b2c3", testNow),
		func(lr plog.LogRecord) { lr.Body().SetStr(strings.Repeat("x", 2048)) },
	)
	appendTenant(ld, "../other", func(plog.LogRecord) {})
	ld.MarkReadOnly()
	require.NoError(t, exp.ConsumeLogs(context.Background(), ld))

	assert.Len(t, entriesOf(loki.received()), 1)
	assert.Equal(t, int64(1), sentLogRecords(t, tt))
	assertDropped(t, tt, map[string]int64{dropInvalidTenant: 1, dropLineTooLong: 1})
	assert.Equal(t, 3, ld.LogRecordCount(), "the caller's read-only logs are left as they are")
}
