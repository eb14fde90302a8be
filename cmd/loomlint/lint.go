package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor"
)

// loadConfig reads the goldenfield processor's config from a collector
// config, or returns its defaults. Records are tagged, never dropped, and
// drift is off: the lint reports every record once.
func loadConfig(path, id string) (*goldenfieldprocessor.Config, error) {
	cfg := goldenfieldprocessor.NewFactory().CreateDefaultConfig().(*goldenfieldprocessor.Config)
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Processors map[string]map[string]any `yaml:"processors"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		section, ok := doc.Processors[id]
		if !ok {
			return nil, fmt.Errorf("%s has no processors::%s; name the processor with -processor", path, id)
		}
		if section != nil {
			if err := confmap.NewFromStringMap(section).Unmarshal(cfg); err != nil {
				return nil, fmt.Errorf("%s: processors::%s: %w", path, id, err)
			}
		}
	}
	cfg.Action.Mode, cfg.Action.DropReasons = goldenfieldprocessor.ActionTag, nil
	cfg.Drift.Enabled = false
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("processors::%s: %w", id, err)
	}
	return cfg, nil
}

// linter sends each record alone through a goldenfield processor and reads,
// after each, what the processor counted for it.
type linter struct {
	logs    processor.Logs
	traces  processor.Traces
	logSink *consumertest.LogsSink
	spans   *consumertest.TracesSink
	reader  *sdkmetric.ManualReader
	meters  *sdkmetric.MeterProvider
	// redacted raw inputs counted so far
	rawSeen int64
	groups  map[groupKey]*stats
}

func newLinter(ctx context.Context, cfg *goldenfieldprocessor.Config) (*linter, error) {
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	f := goldenfieldprocessor.NewFactory()
	set := processor.Settings{
		ID:        component.NewID(f.Type()),
		BuildInfo: component.NewDefaultBuildInfo(),
		TelemetrySettings: component.TelemetrySettings{
			Logger: zap.NewNop(), MeterProvider: meters, TracerProvider: noop.NewTracerProvider(),
		},
	}
	l := &linter{logSink: new(consumertest.LogsSink), spans: new(consumertest.TracesSink), reader: reader, meters: meters, groups: map[groupKey]*stats{}}
	var err error
	if l.logs, err = f.CreateLogs(ctx, set, cfg, l.logSink); err != nil {
		return nil, err
	}
	if l.traces, err = f.CreateTraces(ctx, set, cfg, l.spans); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *linter) close(ctx context.Context) {
	_ = l.logs.Shutdown(ctx)
	_ = l.traces.Shutdown(ctx)
	_ = l.meters.Shutdown(ctx)
}

// lintFile reads a file line by line: OTLP JSON lines as what they hold,
// any other line as a log record with that line as its body.
func (l *linter) lintFile(ctx context.Context, path, service string, stdin io.Reader) error {
	in := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }() // read only
		in = f
		if service == "" {
			service = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		}
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if err := l.lintLine(ctx, line, service); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

func (l *linter) lintLine(ctx context.Context, line []byte, service string) error {
	if kind := otlpKind(line); kind != "" {
		return l.lintOTLP(ctx, kind, line)
	}
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	if service != "" {
		rl.Resource().Attributes().PutStr("service.name", service)
	}
	rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr(string(line))
	return l.lintLogs(ctx, ld)
}

// otlpKind tells an OTLP JSON line (the file exporter's) from a log line.
func otlpKind(line []byte) string {
	if len(line) == 0 || line[0] != '{' {
		return ""
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(line, &probe) != nil {
		return ""
	}
	for _, kind := range []string{"resourceLogs", "resourceSpans"} {
		if _, ok := probe[kind]; ok {
			return kind
		}
	}
	return ""
}

func (l *linter) lintOTLP(ctx context.Context, kind string, line []byte) error {
	if kind == "resourceSpans" {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		if err != nil {
			return err
		}
		// one span at a time, so each gets its own count
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					one := ptrace.NewTraces()
					rs := one.ResourceSpans().AppendEmpty()
					rss.At(i).Resource().CopyTo(rs.Resource())
					ss := rs.ScopeSpans().AppendEmpty()
					sss.At(j).Scope().CopyTo(ss.Scope())
					sss.At(j).Spans().At(k).CopyTo(ss.Spans().AppendEmpty())
					if err := l.lintTraces(ctx, one); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
	if err != nil {
		return err
	}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			for k := 0; k < sls.At(j).LogRecords().Len(); k++ {
				one := plog.NewLogs()
				rl := one.ResourceLogs().AppendEmpty()
				rls.At(i).Resource().CopyTo(rl.Resource())
				sl := rl.ScopeLogs().AppendEmpty()
				sls.At(j).Scope().CopyTo(sl.Scope())
				sls.At(j).LogRecords().At(k).CopyTo(sl.LogRecords().AppendEmpty())
				if err := l.lintLogs(ctx, one); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (l *linter) lintLogs(ctx context.Context, ld plog.Logs) error {
	l.logSink.Reset()
	if err := l.logs.ConsumeLogs(ctx, ld); err != nil {
		return err
	}
	raw, err := l.rawInputs(ctx)
	if err != nil {
		return err
	}
	for _, out := range l.logSink.AllLogs() {
		for i := 0; i < out.ResourceLogs().Len(); i++ {
			rl := out.ResourceLogs().At(i)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				for k := 0; k < rl.ScopeLogs().At(j).LogRecords().Len(); k++ {
					l.add(rl.Resource(), rl.ScopeLogs().At(j).LogRecords().At(k).Attributes(), raw)
				}
			}
		}
	}
	return nil
}

func (l *linter) lintTraces(ctx context.Context, td ptrace.Traces) error {
	l.spans.Reset()
	if err := l.traces.ConsumeTraces(ctx, td); err != nil {
		return err
	}
	raw, err := l.rawInputs(ctx)
	if err != nil {
		return err
	}
	for _, out := range l.spans.AllTraces() {
		for i := 0; i < out.ResourceSpans().Len(); i++ {
			rs := out.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				for k := 0; k < rs.ScopeSpans().At(j).Spans().Len(); k++ {
					l.add(rs.Resource(), rs.ScopeSpans().At(j).Spans().At(k).Attributes(), raw)
				}
			}
		}
	}
	return nil
}

// redactionsMetric counts what the processor redacted; target "input" is raw input.
const redactionsMetric = "otelcol_processor_goldenfield_redactions"

// rawInputs returns how many raw inputs the processor hashed and redacted
// in the record it just processed.
func (l *linter) rawInputs(ctx context.Context) (int64, error) {
	var rm metricdata.ResourceMetrics
	if err := l.reader.Collect(ctx, &rm); err != nil {
		return 0, err
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != redactionsMetric || !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				if v, _ := dp.Attributes.Value(attribute.Key("target")); v.AsString() == "input" {
					total += dp.Value
				}
			}
		}
	}
	n := total - l.rawSeen
	l.rawSeen = total
	return n, nil
}

// groupKey is one line of the report.
type groupKey struct{ Service, Stage string }

// stats are the counts of one service and stage.
type stats struct {
	Records int `json:"records"`
	Valid   int `json:"valid"`
	// Present counts the records carrying each golden field.
	Present map[string]int `json:"present"`
	// Missing and Invalid count the validation failures by field.
	Missing map[string]int `json:"missing,omitempty"`
	Invalid map[string]int `json:"invalid,omitempty"`
	// RawPrompts counts the records that carried raw input.
	RawPrompts int `json:"raw_prompts"`
}

// goldenFields are the report's columns, resource_usage.* as one.
var goldenFields = []string{golden.ReqID, golden.Stage, golden.InputHash, golden.ModelVer, golden.ResourceUsagePrefix + "*"}

func (l *linter) add(res pcommon.Resource, attrs pcommon.Map, raw int64) {
	key := groupKey{Service: serviceOf(res, attrs), Stage: stringAttr(attrs, golden.Stage)}
	s := l.groups[key]
	if s == nil {
		s = &stats{Present: map[string]int{}, Missing: map[string]int{}, Invalid: map[string]int{}}
		l.groups[key] = s
	}
	s.Records++
	if v, ok := attrs.Get(golden.ValidAttr); ok && v.Bool() {
		s.Valid++
	}
	usage := false
	attrs.Range(func(k string, _ pcommon.Value) bool {
		usage = usage || golden.IsResourceUsage(k)
		return !usage
	})
	for _, f := range goldenFields[:4] {
		if stringAttr(attrs, f) != "" {
			s.Present[f]++
		}
	}
	if usage {
		s.Present[goldenFields[4]]++
	}
	for _, f := range listAttr(attrs, golden.MissingAttr) {
		s.Missing[f]++
	}
	for _, f := range listAttr(attrs, golden.InvalidAttr) {
		s.Invalid[f]++
	}
	if raw > 0 {
		s.RawPrompts++
	}
}

// serviceOf names a record's service: the resource's service.name, else
// the record's own service field, as JSON lines often carry it.
func serviceOf(res pcommon.Resource, attrs pcommon.Map) string {
	for _, m := range []pcommon.Map{attrs, res.Attributes()} {
		for _, k := range []string{"service.name", "service"} {
			if s := stringAttr(m, k); s != "" {
				return s
			}
		}
	}
	return "unknown_service"
}

func stringAttr(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return ""
}

func listAttr(m pcommon.Map, k string) []string {
	v, ok := m.Get(k)
	if !ok || v.Type() != pcommon.ValueTypeSlice {
		return nil
	}
	out := make([]string, 0, v.Slice().Len())
	for i := 0; i < v.Slice().Len(); i++ {
		out = append(out, v.Slice().At(i).AsString())
	}
	return out
}
