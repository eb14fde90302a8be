package lokiexporter

import (
	"context"
	"math/bits"
	"unicode/utf8"

	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Reasons a record is dropped before it is sent (drop_reason).
const (
	dropInvalidTenant  = "invalid_tenant"
	dropLineTooLong    = "line_too_long"
	dropRecordTooLarge = "record_too_large"
)

// admittingLogs drops (and cuts) records before exporterhelper sees them.
// exporterhelper counts every record of a push that returns nil in
// otelcol_exporter_sent_log_records, so a record the exporter drops on purpose
// must never reach a push; and its batcher drops a whole batch, with one log
// line, when one record is larger than sending_queue::batch::max_size.
type admittingLogs struct {
	exporter.Logs
	admit func(context.Context, plog.Logs) plog.Logs
}

func (a *admittingLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if ld = a.admit(ctx, ld); ld.LogRecordCount() == 0 {
		return nil
	}
	return a.Logs.ConsumeLogs(ctx, ld)
}

// verdict is what admission does with one record.
type verdict struct {
	drop string // a drop_reason; empty: keep
	cut  bool   // too large for a batch: cut its long string values first
	// framing is the size the record's resource and scope add around it in a batch.
	framing recordFraming
}

// maxBatchBytes is sending_queue::batch::max_size when batches are sized in
// bytes, else 0: a batch sized in records always has room for one.
func maxBatchBytes(cfg *Config) int {
	if !cfg.QueueConfig.HasValue() || !cfg.QueueConfig.Get().Batch.HasValue() {
		return 0
	}
	batch := cfg.QueueConfig.Get().Batch.Get()
	if batch.Sizer != exporterhelper.RequestSizerTypeBytes {
		return 0
	}
	return int(batch.MaxSize)
}

// admit returns ld without the records the exporter drops by policy, each
// counted, and with the records too large for a batch cut down to fit. ld itself
// is returned, unchanged, when every record is kept as it is.
func (e *lokiExporter) admit(ctx context.Context, ld plog.Logs) plog.Logs {
	verdicts := e.judge(ctx, ld)
	if verdicts == nil {
		return ld
	}
	out := plog.NewLogs()
	ld.CopyTo(out)
	dropped := map[string]int64{}
	i := 0
	out.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				v := verdicts[i]
				i++
				if v.cut && !e.cutToFit(lr, v.framing) {
					v.drop = dropRecordTooLarge
				}
				if v.drop != "" {
					dropped[v.drop]++
				}
				return v.drop != ""
			})
			return sl.LogRecords().Len() == 0
		})
		return rl.ScopeLogs().Len() == 0
	})
	for reason, n := range dropped {
		e.telemetry.ExporterLokiRecordsDropped.Add(ctx, n, metric.WithAttributes(attribute.String("drop_reason", reason)))
	}
	return out
}

// judge returns a verdict per record in order, or nil when all are kept as
// they are. ctx is the request's, with its client metadata.
func (e *lokiExporter) judge(ctx context.Context, ld plog.Logs) []verdict {
	var verdicts []verdict
	changed := false
	s := &scratch{}
	n := 0
	for _, rl := range ld.ResourceLogs().All() {
		res := rl.Resource().Attributes()
		validTenant := e.conv.validTenant(ctx, res) // a resource's records share its tenant
		checkSize := e.maxBatchBytes > 0 && !fitsBatch(deltaSize(logsMarshaler.ResourceLogsSize(rl)), e.maxBatchBytes)
		for _, sl := range rl.ScopeLogs().All() {
			var framing recordFraming
			if checkSize {
				framing = framingOf(rl, sl)
			}
			for _, lr := range sl.LogRecords().All() {
				var v verdict
				switch {
				case !validTenant:
					v.drop = dropInvalidTenant
				case e.conv.dropTooLong && len(e.conv.line(lr, res, s)) > e.conv.maxLine:
					v.drop = dropLineTooLong
				case checkSize && !framing.fits(logsMarshaler.LogRecordSize(lr), e.maxBatchBytes):
					v.framing = framing
					if e.conv.dropTooLong {
						v.drop = dropRecordTooLarge
					} else {
						v.cut = true
					}
				}
				if v != (verdict{}) && !changed {
					changed = true
					verdicts = make([]verdict, n, ld.LogRecordCount())
				}
				if changed {
					verdicts = append(verdicts, v)
				}
				n++
			}
		}
	}
	return verdicts
}

var logsMarshaler plog.ProtoMarshaler

// cutToFit cuts lr's string body and attributes to the longest value that can
// still reach Loki whole (a line of line::max_size, a structured metadata entry
// of 64 KiB), so the line Loki gets is the one it would have got, truncated; and
// reports whether lr now fits a batch.
func (e *lokiExporter) cutToFit(lr plog.LogRecord, framing recordFraming) bool {
	limit := max(e.conv.maxLine, maxMetadataBytes)
	cutValue(lr.Body(), limit)
	for _, v := range lr.Attributes().All() {
		cutValue(v, limit)
	}
	return framing.fits(logsMarshaler.LogRecordSize(lr), e.maxBatchBytes)
}

func cutValue(v pcommon.Value, limit int) {
	if v.Type() != pcommon.ValueTypeStr || len(v.Str()) <= limit {
		return
	}
	s := v.Str()
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	v.SetStr(s[:cut])
}

// recordFraming is the protobuf size of a record's resource and scope without
// their records: what a batch holding the record alone carries besides it.
type recordFraming struct{ resource, scope int }

func framingOf(rl plog.ResourceLogs, sl plog.ScopeLogs) recordFraming {
	f := recordFraming{resource: logsMarshaler.ResourceLogsSize(rl), scope: logsMarshaler.ScopeLogsSize(sl)}
	for _, other := range rl.ScopeLogs().All() {
		f.resource -= deltaSize(logsMarshaler.ScopeLogsSize(other))
	}
	for _, lr := range sl.LogRecords().All() {
		f.scope -= deltaSize(logsMarshaler.LogRecordSize(lr))
	}
	return f
}

// fits reports whether a record of recordSize protobuf bytes, alone with its
// resource and scope, fits a batch of maxBytes as exporterhelper sizes it.
func (f recordFraming) fits(recordSize, maxBytes int) bool {
	return fitsBatch(deltaSize(deltaSize(deltaSize(recordSize)+f.scope)+f.resource), maxBytes)
}

// fitsBatch reports whether size bytes of a Logs message fit a batch of maxBytes.
// exporterhelper's split reserves a length prefix sized for maxBytes at the
// resource and the scope level; reserving them at all three keeps to that.
func fitsBatch(size, maxBytes int) bool {
	return size+3*varintSize(maxBytes) <= maxBytes
}

// deltaSize is the size of an embedded message of n bytes: a tag, its length, itself.
func deltaSize(n int) int { return 1 + varintSize(n) + n }

func varintSize(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }
