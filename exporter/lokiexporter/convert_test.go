package lokiexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/grafana/loki/pkg/push"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/tenant"
)

var testNow = time.Unix(1_715_234_890, 0)

// testConfig labels by model_ver, the top segment of stage and k8s namespace,
// and routes tenants by tenant_id.
func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.ClientConfig.Endpoint = "http://loki:3100"
	cfg.Labels.Attributes = []LabelAttribute{
		{Attribute: golden.ModelVer},
		{Attribute: golden.Stage, Name: "stage_top", TopSegment: true},
		{Attribute: "k8s.namespace.name"},
	}
	cfg.Tenant = tenant.Config{FromAttribute: "tenant_id", Default: "shared"}
	return cfg
}

// testLogs has one resource (service model, model_ver on the resource) with the given records.
func testLogs(records ...func(plog.LogRecord)) plog.Logs {
	ld := plog.NewLogs()
	appendTenant(ld, "", records...)
	return ld
}

// appendTenant appends to ld a resource like testLogs's with the records,
// and tenant_id when tenant is not empty.
func appendTenant(ld plog.Logs, tenant string, records ...func(plog.LogRecord)) {
	rl := ld.ResourceLogs().AppendEmpty()
	if tenant != "" {
		rl.Resource().Attributes().PutStr("tenant_id", tenant)
	}
	rl.Resource().Attributes().PutStr("service.name", "model")
	rl.Resource().Attributes().PutStr(golden.ModelVer, "llama3-8b-v2.1.4")
	rl.Resource().Attributes().PutStr("k8s.namespace.name", "inference")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	for _, fill := range records {
		fill(lrs.AppendEmpty())
	}
}

func goldenRecord(reqID string, at time.Time) func(plog.LogRecord) {
	return func(lr plog.LogRecord) {
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lr.SetSeverityNumber(plog.SeverityNumberError)
		lr.Body().SetStr("CUDA out of memory")
		lr.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		lr.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8})
		a := lr.Attributes()
		a.PutStr(golden.ReqID, reqID)
		a.PutStr(golden.Stage, "model/forward")
		a.PutStr(golden.InputHash, "a1b2c3d4")
		a.PutStr(golden.EventID, "ev-1")
		a.PutInt(golden.GPUMemMb, 12450)
		a.PutStr("error.type", "oom")
	}
}

func metadataMap(e push.Entry) map[string]string {
	m := map[string]string{}
	for _, l := range e.StructuredMetadata {
		m[l.Name] = l.Value
	}
	return m
}

func TestConvertGoldenFieldsAndLabels(t *testing.T) {
	c := newConverter(testConfig())
	byTenant, stats := c.convert(context.Background(), testLogs(goldenRecord("req-1715234890123-a1b2c3", testNow)), testNow)
	assert.Equal(t, convertStats{overflows: []int64{0, 0, 0}}, stats)
	require.Contains(t, byTenant, "shared")
	got := byTenant["shared"].sorted()
	require.Len(t, got, 1)

	assert.Equal(t, `{k8s_namespace_name="inference", level="error", model_ver="llama3-8b-v2.1.4", service_name="model", stage_top="model"}`, got[0].key)
	e := got[0].entries[0]
	assert.Equal(t, testNow.UnixNano(), e.Timestamp.UnixNano())
	assert.Equal(t, map[string]string{
		"req_id":                    "req-1715234890123-a1b2c3",
		"trace_id":                  "0102030405060708090a0b0c0d0e0f10",
		"span_id":                   "0102030405060708",
		"stage":                     "model/forward",
		"input_hash":                "a1b2c3d4",
		"event_id":                  "ev-1",
		"resource_usage_gpu_mem_mb": "12450",
	}, metadataMap(e), "golden fields are structured metadata; model_ver is a label already")

	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.Line), &line))
	assert.Equal(t, map[string]any{"body": "CUDA out of memory", "error.type": "oom"}, line,
		"the line carries the body and the attributes sent nowhere else")
}

func TestConvertCardinalityOverflow(t *testing.T) {
	cfg := testConfig()
	cfg.Labels.MaxValuesPerLabel = 2
	c := newConverter(cfg)
	ld := testLogs()
	for i := range 4 {
		lr := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
		lr.Attributes().PutStr(golden.ModelVer, fmt.Sprintf("model-%d", i))
		lr.Attributes().PutStr("k8s.namespace.name", fmt.Sprintf("ns-%d", i))
	}
	byTenant, stats := c.convert(context.Background(), ld, testNow)
	assert.Equal(t, []int64{2, 0, 2}, stats.overflows)

	// Two streams hold the admitted values; the overflowing records share a
	// third stream without those labels and carry the values as metadata.
	streams := byTenant["shared"].sorted()
	require.Len(t, streams, 3)
	overflowed := map[string]string{}
	for _, s := range streams {
		if strings.Contains(s.key, "model_ver") {
			continue
		}
		for _, e := range s.entries {
			md := metadataMap(e)
			overflowed[md["model_ver"]] = md["k8s_namespace_name"]
		}
	}
	assert.Equal(t, map[string]string{"model-2": "ns-2", "model-3": "ns-3"}, overflowed)
}

func TestConvertTenants(t *testing.T) {
	c := newConverter(testConfig())
	ld := testLogs(
		func(plog.LogRecord) {},
		// A record attribute never picks the tenant: only the resource's, set by a trusted tier.
		func(lr plog.LogRecord) { lr.Attributes().PutStr("tenant_id", "team-b") },
	)
	appendTenant(ld, "team-a", func(plog.LogRecord) {})
	appendTenant(ld, "team-b", func(plog.LogRecord) {})
	appendTenant(ld, "../etc", func(plog.LogRecord) {})
	byTenant, stats := c.convert(context.Background(), ld, testNow)
	assert.Len(t, byTenant, 3)
	for id, records := range map[string]int{"team-a": 1, "team-b": 1, "shared": 2} {
		streams := byTenant[id].sorted()
		n := 0
		for _, s := range streams {
			n += len(s.entries)
		}
		assert.Equal(t, records, n, id)
	}
	assert.Equal(t, int64(1), stats.invalidTenant)
	line := byTenant["team-a"].sorted()[0].entries[0].Line
	assert.NotContains(t, line, "tenant_id", "the tenant attribute is not repeated in the line")
}

func TestConvertLineLimit(t *testing.T) {
	long := func(lr plog.LogRecord) { lr.Body().SetStr(strings.Repeat("x", 5000)) }
	cfg := testConfig()
	cfg.Line.MaxSize = 1024
	byTenant, stats := newConverter(cfg).convert(context.Background(), testLogs(long), testNow)
	line := byTenant["shared"].sorted()[0].entries[0].Line
	assert.Len(t, line, 1024)
	assert.True(t, strings.HasSuffix(line, truncationMarker))
	assert.Equal(t, int64(1), stats.truncated)

	cfg.Line.OnTooLong = OnTooLongDrop
	byTenant, stats = newConverter(cfg).convert(context.Background(), testLogs(long), testNow)
	assert.Empty(t, byTenant)
	assert.Equal(t, int64(1), stats.tooLong)
}

func TestConvertMetadataLimit(t *testing.T) {
	cfg := testConfig()
	many := func(lr plog.LogRecord) {
		for i := range maxMetadataEntries + 10 {
			lr.Attributes().PutInt(fmt.Sprintf("%sm%d", golden.ResourceUsagePrefix, i), int64(i))
		}
		lr.Attributes().PutStr(golden.ReqID, strings.Repeat("r", maxMetadataBytes))
	}
	byTenant, stats := newConverter(cfg).convert(context.Background(), testLogs(many), testNow)
	e := byTenant["shared"].sorted()[0].entries[0]
	assert.LessOrEqual(t, len(e.StructuredMetadata), maxMetadataEntries)
	size := 0
	for _, m := range e.StructuredMetadata {
		size += len(m.Name) + len(m.Value)
	}
	assert.LessOrEqual(t, size, maxMetadataBytes)
	assert.Positive(t, stats.metadataDropped)
}

func TestConvertDefaults(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Line.Format = LineFormatRaw
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetSeverityText("WARNING")
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(testNow.Add(-time.Second)))
	lr.Body().SetStr("hello")
	byTenant, _ := newConverter(cfg).convert(context.Background(), ld, testNow)
	require.Contains(t, byTenant, "", "no tenant configured: no header")
	s := byTenant[""].sorted()[0]
	assert.Equal(t, `{level="warn", service_name="unknown_service"}`, s.key)
	assert.Equal(t, "hello", s.entries[0].Line)
	assert.Equal(t, testNow.Add(-time.Second).UnixNano(), s.entries[0].Timestamp.UnixNano(), "observed time when the record has none")
}

func TestLevelOf(t *testing.T) {
	for _, tc := range []struct {
		number plog.SeverityNumber
		text   string
		want   string
	}{
		{plog.SeverityNumberTrace2, "", "trace"},
		{plog.SeverityNumberDebug, "", "debug"},
		{plog.SeverityNumberInfo4, "ERROR", "info"},
		{plog.SeverityNumberWarn, "", "warn"},
		{plog.SeverityNumberError3, "", "error"},
		{plog.SeverityNumberFatal, "", "fatal"},
		{0, "Critical", "fatal"},
		{0, "err", "error"},
		{0, "whatever", "unknown"},
		{0, "", "unknown"},
	} {
		lr := plog.NewLogRecord()
		lr.SetSeverityNumber(tc.number)
		lr.SetSeverityText(tc.text)
		assert.Equal(t, tc.want, levelOf(lr), "%v %q", tc.number, tc.text)
	}
}
