package lokiexporter

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"

	"github.com/loom-otel/loom/internal/golden"
)

const benchRecords = 1000

// inferenceLogs is one batch as Loom's gateway tier sees it: four services,
// every record with the golden fields, a trace context and a short message.
func inferenceLogs() plog.Logs {
	ld := plog.NewLogs()
	services := []string{"gateway", "preproc", "model", "postproc"}
	stages := []string{"gateway/auth", "preproc/normalize", "model/forward", "postproc/filter"}
	for s, service := range services {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", service)
		rl.Resource().Attributes().PutStr("k8s.namespace.name", "inference")
		rl.Resource().Attributes().PutStr(golden.ModelVer, "llama3-8b-v2.1.4")
		lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for i := range benchRecords / len(services) {
			lr := lrs.AppendEmpty()
			lr.SetTimestamp(pcommon.NewTimestampFromTime(testNow.Add(time.Duration(i) * time.Millisecond)))
			lr.SetSeverityNumber(plog.SeverityNumberInfo)
			lr.SetTraceID(pcommon.TraceID{byte(i), byte(i >> 8), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, byte(s)})
			lr.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), 3, 4, 5, 6, 7, byte(s)})
			lr.Body().SetStr(fmt.Sprintf("%s finished step for request in %d ms, queue depth %d", service, 10+i%90, i%17))
			a := lr.Attributes()
			a.PutStr(golden.ReqID, fmt.Sprintf("req-1715234890%03d-%06x", i%1000, i*7919))
			a.PutStr(golden.Stage, stages[s])
			a.PutStr(golden.InputHash, fmt.Sprintf("%08x", i*2654435761))
			a.PutInt(golden.LatencyMs, int64(10+i%90))
			a.PutStr("http.route", "/v1/chat/completions")
		}
	}
	return ld
}

// BenchmarkEncode compares batch encode+compress for Loki's push API with the
// core otlphttp exporter's encoding of the same logs (protobuf, gzip at the
// default level as confighttp applies it). One goroutine: records/s is per core.
func BenchmarkEncode(b *testing.B) {
	ld := inferenceLogs()
	report := func(b *testing.B, wireBytes int) {
		b.ReportMetric(float64(benchRecords*b.N)/b.Elapsed().Seconds(), "records/s")
		b.ReportMetric(float64(wireBytes)/benchRecords, "B/record")
	}

	b.Run("baseline-otlphttp", func(b *testing.B) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		for b.Loop() {
			raw, err := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			zw.Reset(&buf)
			_, _ = zw.Write(raw)
			_ = zw.Close()
		}
		report(b, buf.Len())
	})

	for _, encoding := range []Encoding{EncodingProtobuf, EncodingJSON} {
		name := "loki-protobuf-snappy"
		if encoding == EncodingJSON {
			name = "loki-json"
		}
		b.Run(name, func(b *testing.B) {
			cfg := testConfig()
			cfg.Encoding = encoding
			conv := newConverter(cfg)
			enc := &encoder{encoding: encoding}
			wire := 0
			for b.Loop() {
				byTenant, _ := conv.convert(context.Background(), ld, testNow)
				wire = 0
				for _, s := range byTenant {
					body, err := enc.encode(s.sorted())
					if err != nil {
						b.Fatal(err)
					}
					wire += len(body)
				}
			}
			report(b, wire)
		})
	}
}
