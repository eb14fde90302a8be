package lokiexporter

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/golang/snappy"
	"github.com/grafana/loki/pkg/push"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/golden"
)

// FuzzEncode feeds hostile attribute names, label values and bodies through
// conversion and encoding: nothing may panic, every label set must parse back to
// valid Loki labels, every line and metadata value must be valid UTF-8 within
// its limit, and json lines must be JSON.
func FuzzEncode(f *testing.F) {
	f.Add("k8s.namespace.name", "inference", "model loaded", "req-1715234890123-a1b2c3")
	f.Add("__name__", "a\"b\\c\nd", `{"json":"body"}`, "")
	f.Add("9x", "\xff\xfe", "bad \xff utf8 \x00", "req-\xff")
	f.Add("", strings.Repeat("v", 3000), strings.Repeat("é", 2000), strings.Repeat("r", 70000))
	f.Add("é.ü", "}{,=", "line\nbreak\ttab", "a b")
	f.Fuzz(func(t *testing.T, attrName, labelValue, body, reqID string) {
		for _, format := range []LineFormat{LineFormatJSON, LineFormatLogfmt, LineFormatRaw} {
			cfg := testConfig()
			cfg.Line.Format = format
			cfg.Line.MaxSize = 1024
			cfg.Labels.Attributes = append(cfg.Labels.Attributes, LabelAttribute{Attribute: "fuzzed"})
			ld := testLogs(func(lr plog.LogRecord) {
				lr.Body().SetStr(body)
				lr.Attributes().PutStr("fuzzed", labelValue)
				lr.Attributes().PutStr(golden.ModelVer, labelValue)
				lr.Attributes().PutStr(golden.ReqID, reqID)
				lr.Attributes().PutStr(attrName, labelValue)
			})
			byTenant, _ := newConverter(cfg).convert(context.Background(), ld, testNow)
			for _, s := range byTenant {
				for _, st := range s.sorted() {
					checkLabelSet(t, st.key)
					for _, e := range st.entries {
						checkEntry(t, format, cfg.Line.MaxSize, e)
					}
				}
				enc := &encoder{encoding: EncodingProtobuf}
				body, err := enc.encode(s.sorted())
				if err != nil {
					t.Fatal(err)
				}
				raw, err := snappy.Decode(nil, body)
				if err != nil {
					t.Fatal(err)
				}
				var req push.PushRequest
				if err := req.Unmarshal(raw); err != nil {
					t.Fatal(err)
				}
				if js, _ := (&encoder{encoding: EncodingJSON}).encode(s.sorted()); !json.Valid(js) {
					t.Fatalf("invalid JSON push: %q", js)
				}
			}
		}
	})
}

// checkLabelSet parses {name="value", ...} as Loki does and checks Loki's rules.
func checkLabelSet(t *testing.T, key string) {
	t.Helper()
	rest, ok := strings.CutPrefix(key, "{")
	if !ok || !strings.HasSuffix(rest, "}") {
		t.Fatalf("label set %q is not braced", key)
	}
	rest = strings.TrimSuffix(rest, "}")
	names := 0
	for rest != "" {
		name, after, ok := strings.Cut(rest, "=")
		if !ok || !validLabelName(name) {
			t.Fatalf("label set %q: bad name %q", key, name)
		}
		quoted, err := strconv.QuotedPrefix(after)
		if err != nil {
			t.Fatalf("label set %q: %v", key, err)
		}
		value, _ := strconv.Unquote(quoted)
		if value == "" || !utf8.ValidString(value) || len(value) > maxLabelValueBytes {
			t.Fatalf("label set %q: bad value %q", key, value)
		}
		names++
		rest = strings.TrimPrefix(after[len(quoted):], ", ")
	}
	if names == 0 || names > maxLabelNames+1 {
		t.Fatalf("label set %q has %d labels", key, names)
	}
}

func checkEntry(t *testing.T, format LineFormat, maxSize int, e push.Entry) {
	t.Helper()
	if !utf8.ValidString(e.Line) || len(e.Line) > maxSize {
		t.Fatalf("line of %d bytes, valid UTF-8 %v", len(e.Line), utf8.ValidString(e.Line))
	}
	if format == LineFormatJSON && !strings.HasSuffix(e.Line, truncationMarker) && !json.Valid([]byte(e.Line)) {
		t.Fatalf("json line is not JSON: %q", e.Line)
	}
	size := 0
	for _, m := range e.StructuredMetadata {
		if !validLabelName(m.Name) || !utf8.ValidString(m.Value) {
			t.Fatalf("bad structured metadata %q=%q", m.Name, m.Value)
		}
		size += len(m.Name) + len(m.Value)
	}
	if size > maxMetadataBytes || len(e.StructuredMetadata) > maxMetadataEntries {
		t.Fatalf("structured metadata over Loki's limits: %d entries, %d bytes", len(e.StructuredMetadata), size)
	}
}
