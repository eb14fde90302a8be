package main

import (
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The recorded layout: one CSV per minute of spans (trace/HH_MM_trace.csv)
// and of container log lines (log/HH_MM_log.csv), with a header row.
var (
	spanColumns = []string{"TraceID", "SpanID", "ParentID", "PodName", "OperationName", "StartTimeUnixNano", "EndTimeUnixNano"}
	logColumns  = []string{"TimeUnixNano", "Node", "PodName", "TraceID", "SpanID", "Log", "Timestamp"}
)

// record is one recorded span or log line, ready to send: time (unix ns,
// as recorded) orders the replay.
type record struct {
	time int64
	pod  string
	node string
	span *spanRow
	log  *logRow
}

type spanRow struct {
	trace      pcommon.TraceID
	id, parent pcommon.SpanID
	name       string
	start, end int64
}

type logRow struct {
	trace  pcommon.TraceID
	span   pcommon.SpanID
	body   string
	stream string
}

// serviceOf is a pod's service: its name without the replica set's hash
// and the pod's suffix (ts-basic-service-5dc8d4f9fd-llznp → ts-basic-service).
func serviceOf(pod string) string {
	parts := strings.Split(pod, "-")
	if len(parts) <= 2 {
		return pod
	}
	return strings.Join(parts[:len(parts)-2], "-")
}

// columns maps the wanted columns of a header row to their positions.
func columns(header, want []string) ([]int, error) {
	at := make([]int, len(want))
	for i, name := range want {
		at[i] = -1
		for j, h := range header {
			if strings.TrimPrefix(h, "\ufeff") == name {
				at[i] = j
			}
		}
		if at[i] < 0 {
			return nil, fmt.Errorf("no column %q in header %v", name, header)
		}
	}
	return at, nil
}

// readRows reads a CSV with a header row, calling row with the wanted
// columns of each row. A row that does not parse is counted in bad, not sent.
func readRows(r io.Reader, want []string, row func([]string) error) (bad int, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return 0, fmt.Errorf("reading the header: %w", err)
	}
	at, err := columns(header, want)
	if err != nil {
		return 0, err
	}
	fields := make([]string, len(want))
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return bad, nil
		}
		if err != nil {
			var perr *csv.ParseError
			if errors.As(err, &perr) {
				bad++
				continue
			}
			return bad, err
		}
		ok := true
		for i, j := range at {
			if j >= len(rec) {
				ok = false
				break
			}
			fields[i] = rec[j]
		}
		if !ok || row(fields) != nil {
			bad++
		}
	}
}

func readSpans(r io.Reader, out *[]record) (bad int, err error) {
	return readRows(r, spanColumns, func(f []string) error {
		s := &spanRow{name: f[4]}
		var err error
		if s.trace, err = traceID(f[0]); err != nil {
			return err
		}
		if s.id, err = spanID(f[1]); err != nil {
			return err
		}
		if f[2] != "root" && f[2] != "" {
			if s.parent, err = spanID(f[2]); err != nil {
				return err
			}
		}
		if s.start, err = strconv.ParseInt(f[5], 10, 64); err != nil {
			return err
		}
		if s.end, err = strconv.ParseInt(f[6], 10, 64); err != nil {
			return err
		}
		*out = append(*out, record{time: s.start, pod: f[3], span: s})
		return nil
	})
}

func readLogs(r io.Reader, out *[]record) (bad int, err error) {
	return readRows(r, logColumns, func(f []string) error {
		t, err := logTime(f[0], f[6])
		if err != nil {
			return err
		}
		l := &logRow{body: f[5]}
		// The container runtime's JSON line: the application's text is in "log".
		var line struct {
			Log    string `json:"log"`
			Stream string `json:"stream"`
		}
		if json.Unmarshal([]byte(f[5]), &line) == nil && line.Log != "" {
			l.body, l.stream = strings.TrimRight(line.Log, "\n"), line.Stream
		}
		// A line logged outside any request has no context: it is sent without.
		l.trace, _ = traceID(f[3])
		l.span, _ = spanID(f[4])
		*out = append(*out, record{time: t, pod: f[2], node: f[1], log: l})
		return nil
	})
}

// logTime is a log line's time: its nanoseconds, unless they disagree with
// its written timestamp by more than a minute (some rows of the recorded
// data carry a corrupt number there), then the timestamp (UTC when it names
// no zone).
func logTime(nanos, stamp string) (int64, error) {
	t, err := strconv.ParseInt(nanos, 10, 64)
	counted := err == nil
	written, ok := parseStamp(stamp)
	switch {
	case !ok && !counted:
		return 0, fmt.Errorf("no usable time: %q, %q", nanos, stamp)
	case ok && (!counted || time.Duration(abs(t-written.UnixNano())) > time.Minute):
		return written.UnixNano(), nil
	}
	return t, nil
}

// parseStamp reads a written timestamp, UTC when it names no zone.
func parseStamp(stamp string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, stamp); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func traceID(s string) (pcommon.TraceID, error) {
	var id pcommon.TraceID
	err := decodeID(id[:], s)
	return id, err
}

func spanID(s string) (pcommon.SpanID, error) {
	var id pcommon.SpanID
	err := decodeID(id[:], s)
	return id, err
}

// decodeID fills id from s, exactly twice as many hex digits as id has
// bytes; on an error id is left zero.
func decodeID(id []byte, s string) error {
	if len(s) != hex.EncodedLen(len(id)) {
		return fmt.Errorf("id %q is not %d hex digits", s, hex.EncodedLen(len(id)))
	}
	if _, err := hex.Decode(id, []byte(s)); err != nil {
		clear(id)
		return fmt.Errorf("id %q: %w", s, err)
	}
	return nil
}

// putResource describes the pod a record came from, as the Kubernetes
// attributes processor and the filelog receiver would.
func putResource(res pcommon.Resource, r *record) {
	a := res.Attributes()
	a.PutStr(string(semconv.ServiceNameKey), serviceOf(r.pod))
	a.PutStr(string(semconv.K8SPodNameKey), r.pod)
	a.PutStr(string(semconv.ServiceInstanceIDKey), r.pod)
	if r.node != "" {
		a.PutStr(string(semconv.K8SNodeNameKey), r.node)
	}
}

// batch is the records of one send, by signal, a resource per pod.
type batch struct {
	traces ptrace.Traces
	logs   plog.Logs
	spans  map[string]ptrace.SpanSlice
	lines  map[string]plog.LogRecordSlice
	n      int
}

func newBatch() *batch {
	return &batch{traces: ptrace.NewTraces(), logs: plog.NewLogs(),
		spans: map[string]ptrace.SpanSlice{}, lines: map[string]plog.LogRecordSlice{}}
}

// add puts r in the batch, its time moved by shift nanoseconds.
func (b *batch) add(r *record, shift int64) {
	b.n++
	at := func(ns int64) pcommon.Timestamp { return pcommon.Timestamp(ns + shift) }
	if s := r.span; s != nil {
		slice, ok := b.spans[r.pod]
		if !ok {
			rs := b.traces.ResourceSpans().AppendEmpty()
			putResource(rs.Resource(), r)
			slice = rs.ScopeSpans().AppendEmpty().Spans()
			b.spans[r.pod] = slice
		}
		span := slice.AppendEmpty()
		span.SetTraceID(s.trace)
		span.SetSpanID(s.id)
		span.SetParentSpanID(s.parent)
		span.SetName(s.name)
		span.SetStartTimestamp(at(s.start))
		span.SetEndTimestamp(at(s.end))
		return
	}
	l := r.log
	slice, ok := b.lines[r.pod]
	if !ok {
		rl := b.logs.ResourceLogs().AppendEmpty()
		putResource(rl.Resource(), r)
		slice = rl.ScopeLogs().AppendEmpty().LogRecords()
		b.lines[r.pod] = slice
	}
	lr := slice.AppendEmpty()
	lr.SetTimestamp(at(r.time))
	lr.SetObservedTimestamp(at(r.time))
	lr.SetTraceID(l.trace)
	lr.SetSpanID(l.span)
	lr.Body().SetStr(l.body)
	if l.stream != "" {
		lr.Attributes().PutStr("log.iostream", l.stream)
	}
}
