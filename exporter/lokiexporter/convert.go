package lokiexporter

import (
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/grafana/loki/pkg/push"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/tenant"
)

// Loki's documented per-entry structured metadata limits.
const (
	maxMetadataEntries = 128
	maxMetadataBytes   = 64 << 10
)

// converter turns log records into per-tenant Loki streams. It is safe for
// concurrent use: the cardinality guard is its only mutable state.
type converter struct {
	format      LineFormat
	lineAttrs   []string // the attributes a line carries; empty: all that are not sent otherwise
	maxLine     int
	dropTooLong bool
	tenant      tenant.Config
	rules       []labelRule
	fullLabel   map[string]int      // attribute -> rule that sends its whole value as a label
	metadata    []string            // extra attributes sent as structured metadata
	notInLine   map[string]struct{} // attributes sent as labels, metadata or tenant
	guard       *cardinalityGuard
	// overflowToMetadata is false for rules whose attribute reaches structured
	// metadata anyway (golden fields, structured_metadata::attributes).
	overflowToMetadata []bool

	// slots are the stream labels sorted by name: service_name, level and one per rule.
	slotNames   []string
	serviceSlot int
	levelSlot   int
	ruleSlot    []int
}

type labelRule struct {
	attribute  string
	name       string
	topSegment bool
}

// convertStats counts what a conversion dropped, cut or moved, for telemetry.
type convertStats struct {
	truncated       int64
	tooLong         int64 // dropped
	invalidTenant   int64 // dropped
	metadataDropped int64
	overflows       []int64 // per rule
}

func newConverter(cfg *Config) *converter {
	c := &converter{
		format:      cfg.Line.Format,
		lineAttrs:   cfg.Line.Attributes,
		maxLine:     cfg.Line.MaxSize,
		dropTooLong: cfg.Line.OnTooLong == OnTooLongDrop,
		tenant:      cfg.Tenant,
		fullLabel:   map[string]int{},
		metadata:    cfg.StructuredMetadata.Attributes,
		notInLine:   map[string]struct{}{},
		guard:       newCardinalityGuard(len(cfg.Labels.Attributes), cfg.Labels.MaxValuesPerLabel, cfg.Labels.CardinalityWindow),
	}
	c.slotNames = []string{labelServiceName, labelLevel}
	for i, la := range cfg.Labels.Attributes {
		r := labelRule{attribute: la.Attribute, name: la.labelName(), topSegment: la.TopSegment}
		c.rules = append(c.rules, r)
		c.slotNames = append(c.slotNames, r.name)
		if !r.topSegment {
			c.fullLabel[r.attribute] = i
		}
		c.notInLine[r.attribute] = struct{}{}
		c.overflowToMetadata = append(c.overflowToMetadata,
			!golden.IsPerRecord(r.attribute) && !slices.Contains(c.metadata, r.attribute))
	}
	for _, name := range c.metadata {
		c.notInLine[name] = struct{}{}
	}
	if c.tenant.FromAttribute != "" {
		c.notInLine[c.tenant.FromAttribute] = struct{}{}
	}
	slices.Sort(c.slotNames)
	c.serviceSlot = slices.Index(c.slotNames, labelServiceName)
	c.levelSlot = slices.Index(c.slotNames, labelLevel)
	for _, r := range c.rules {
		c.ruleSlot = append(c.ruleSlot, slices.Index(c.slotNames, r.name))
	}
	return c
}

// scratch holds one conversion's reusable buffers.
type scratch struct {
	labels   []label
	admitted []bool
	key      []byte
	line     []byte
	attrs    []attr
	resMeta  []push.LabelAdapter
}

// convert groups ld's records into streams per tenant; ctx is the push's,
// with its client metadata. now stamps records without a timestamp and drives
// the cardinality window.
func (c *converter) convert(ctx context.Context, ld plog.Logs, now time.Time) (map[string]streams, convertStats) {
	out := map[string]streams{}
	stats := convertStats{overflows: make([]int64, len(c.rules))}
	s := &scratch{labels: make([]label, len(c.slotNames)), admitted: make([]bool, len(c.rules))}
	for i, name := range c.slotNames {
		s.labels[i].name = name
	}
	for _, rl := range ld.ResourceLogs().All() {
		res := rl.Resource().Attributes()
		s.labels[c.serviceSlot].value = unknownService
		if v, ok := res.Get(string(semconv.ServiceNameKey)); ok && v.AsString() != "" {
			s.labels[c.serviceSlot].value = sanitizeValue(v.AsString(), maxLabelValueBytes)
		}
		s.resMeta = s.resMeta[:0]
		for k, v := range res.All() {
			if golden.IsPerRecord(k) {
				s.resMeta = append(s.resMeta, push.LabelAdapter{Name: k, Value: v.AsString()})
			}
		}
		id, err := c.tenant.Of(ctx, res)
		if err != nil {
			for _, sl := range rl.ScopeLogs().All() {
				stats.invalidTenant += int64(sl.LogRecords().Len())
			}
			continue
		}
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				entry, ok := c.entry(lr, res, s, &stats, now)
				if !ok {
					continue
				}
				st := out[id]
				if st == nil {
					st = streams{}
					out[id] = st
				}
				st.add(s.key, s.labels, entry)
			}
		}
	}
	return out, stats
}

// entry converts one record and leaves its label set in s.key and s.labels.
func (c *converter) entry(lr plog.LogRecord, res pcommon.Map, s *scratch, stats *convertStats, now time.Time) (push.Entry, bool) {
	ts := lr.Timestamp()
	if ts == 0 {
		ts = lr.ObservedTimestamp()
	}
	e := push.Entry{Timestamp: now}
	if ts != 0 {
		e.Timestamp = ts.AsTime()
	}

	if len(c.line(lr, res, s)) > c.maxLine {
		if c.dropTooLong {
			stats.tooLong++
			return e, false
		}
		s.line = fitLine(s.line, c.maxLine)
		stats.truncated++
	}
	e.Line = string(s.line)

	md := metadataBuilder{entries: make(push.LabelsAdapter, 0, 8)}
	if tid := lr.TraceID(); !tid.IsEmpty() {
		md.add(golden.TraceID, hex.EncodeToString(tid[:]))
	}
	if sid := lr.SpanID(); !sid.IsEmpty() {
		md.add(golden.SpanID, hex.EncodeToString(sid[:]))
	}

	s.labels[c.levelSlot].value = levelOf(lr)
	for i, r := range c.rules {
		v := lookup(lr.Attributes(), res, r.attribute)
		if r.topSegment {
			v, _, _ = strings.Cut(v, "/")
		}
		v = sanitizeValue(v, maxLabelValueBytes)
		s.admitted[i] = v == "" || c.guard.admit(i, v, now)
		if !s.admitted[i] {
			stats.overflows[i]++
			if c.overflowToMetadata[i] {
				md.add(r.name, v)
			}
			v = ""
		}
		s.labels[c.ruleSlot[i]].value = v
	}
	s.key = appendLabelSet(s.key[:0], s.labels)

	for k, v := range lr.Attributes().All() {
		if golden.IsPerRecord(k) && !c.sentAsLabel(k, s) {
			md.add(k, v.AsString())
		}
	}
	for _, m := range s.resMeta {
		if _, onRecord := lr.Attributes().Get(m.Name); !onRecord && !c.sentAsLabel(m.Name, s) {
			md.add(m.Name, m.Value)
		}
	}
	for _, name := range c.metadata {
		if v := lookup(lr.Attributes(), res, name); v != "" && !c.sentAsLabel(name, s) {
			md.add(name, v)
		}
	}
	e.StructuredMetadata = md.entries
	stats.metadataDropped += md.dropped
	return e, true
}

// line renders lr's log line into s.line, untruncated, and returns it.
func (c *converter) line(lr plog.LogRecord, res pcommon.Map, s *scratch) []byte {
	s.line = appendLine(s.line[:0], c.format, lr.Body(), c.lineAttributes(lr, res, s))
	return s.line
}

// validTenant reports whether the tenant of a resource's records, sent with
// ctx, is valid (or the default).
func (c *converter) validTenant(ctx context.Context, resource pcommon.Map) bool {
	_, err := c.tenant.Of(ctx, resource)
	return err == nil
}

// sentAsLabel reports whether attribute k already went out whole as a stream label.
func (c *converter) sentAsLabel(k string, s *scratch) bool {
	i, ok := c.fullLabel[k]
	return ok && s.admitted[i]
}

// lineAttributes selects the attributes a json or logfmt line carries.
func (c *converter) lineAttributes(lr plog.LogRecord, res pcommon.Map, s *scratch) []attr {
	s.attrs = s.attrs[:0]
	if c.format == LineFormatRaw {
		return nil
	}
	if len(c.lineAttrs) > 0 {
		for _, k := range c.lineAttrs {
			v, ok := lr.Attributes().Get(k)
			if !ok {
				v, ok = res.Get(k)
			}
			if ok {
				s.attrs = append(s.attrs, attr{key: k, value: v})
			}
		}
		return s.attrs
	}
	for k, v := range lr.Attributes().All() {
		if _, skip := c.notInLine[k]; !skip && !golden.IsPerRecord(k) {
			s.attrs = append(s.attrs, attr{key: k, value: v})
		}
	}
	return s.attrs
}

// lookup returns the record's attribute name as text, else the resource's, else "".
func lookup(record, resource pcommon.Map, name string) string {
	v, ok := record.Get(name)
	if !ok {
		v, ok = resource.Get(name)
	}
	if !ok {
		return ""
	}
	return v.AsString()
}

// metadataBuilder collects one entry's structured metadata within Loki's limits.
type metadataBuilder struct {
	entries push.LabelsAdapter
	bytes   int
	dropped int64
}

func (m *metadataBuilder) add(name, value string) {
	name = sanitizeLabelName(name)
	value = sanitizeValue(value, maxMetadataBytes)
	if len(m.entries) == maxMetadataEntries || m.bytes+len(name)+len(value) > maxMetadataBytes {
		m.dropped++
		return
	}
	m.bytes += len(name) + len(value)
	m.entries = append(m.entries, push.LabelAdapter{Name: name, Value: value})
}

// levelOf maps a record's severity to the level label, one of a fixed set so the
// label stays bounded: trace, debug, info, warn, error, fatal or unknown.
func levelOf(lr plog.LogRecord) string {
	if n := lr.SeverityNumber(); n != plog.SeverityNumberUnspecified {
		switch {
		case n <= plog.SeverityNumberTrace4:
			return "trace"
		case n <= plog.SeverityNumberDebug4:
			return "debug"
		case n <= plog.SeverityNumberInfo4:
			return "info"
		case n <= plog.SeverityNumberWarn4:
			return "warn"
		case n <= plog.SeverityNumberError4:
			return "error"
		default:
			return "fatal"
		}
	}
	text := strings.ToLower(lr.SeverityText())
	for _, level := range [...]struct{ prefix, level string }{
		{"trace", "trace"}, {"debug", "debug"}, {"info", "info"}, {"notice", "info"},
		{"warn", "warn"}, {"err", "error"}, {"fatal", "fatal"}, {"crit", "fatal"},
		{"panic", "fatal"}, {"alert", "fatal"}, {"emerg", "fatal"},
	} {
		if strings.HasPrefix(text, level.prefix) {
			return level.level
		}
	}
	return "unknown"
}
