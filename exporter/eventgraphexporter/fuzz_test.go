package eventgraphexporter

import (
	"strings"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/golden"
)

// FuzzConvert: whatever a record holds, conversion does not panic and yields
// a valid event id, valid references and safe text. (That stores keep such
// text literally is the conformance suite's HostileStrings and
// TestBadInputStoredLiterally; the pure-Go SQLite is too slow under fuzzing
// instrumentation to sit in this loop.)
func FuzzConvert(f *testing.F) {
	f.Add("req-1715234890123-a1b2c3", "model/forward", "forward done", strings.Repeat("ab", 16), causeID+":triggered", rootID, int32(9))
	f.Add(`'}) DETACH DELETE n //`, "`stage`", "\xff\xfe", "", "::", "zz", int32(24))
	f.Add(strings.Repeat("é", 3000), "", "", "not-an-id", causeID, "", int32(-3))
	c := newConverter(256)
	f.Fuzz(func(t *testing.T, reqID, stage, body, eventID, parent, asyncOf string, severity int32) {
		ld := oneLog(func(lr plog.LogRecord) {
			lr.SetSeverityNumber(plog.SeverityNumber(severity))
			lr.Body().SetStr(body)
			a := lr.Attributes()
			a.PutStr(golden.ReqID, reqID)
			a.PutStr(golden.Stage, stage)
			a.PutStr(golden.EventID, eventID)
			a.PutStr(golden.StitchAsyncOf, asyncOf)
			a.PutEmptySlice(golden.CausalParents).AppendEmpty().SetStr(parent)
		})
		events, st := c.logs(ld)
		if len(events) != 1 {
			t.Fatalf("%d events from one record", len(events))
		}
		e := events[0]
		for _, id := range append([]string{e.ID}, refs(e.AsyncOf, e.Causes)...) {
			if _, ok := golden.ParseEventHash(id); !ok {
				t.Fatalf("invalid event id %q", id)
			}
		}
		for _, v := range []string{e.ReqID, e.Stage, e.Message, e.Service, e.SeverityText} {
			if !utf8.ValidString(v) || len(v) > c.maxBytes {
				t.Fatalf("unsafe text %q", v)
			}
		}
		if e.Failed != (severity >= 17) {
			t.Fatalf("failed %v for severity %d", e.Failed, severity)
		}
		if st.edges != len(e.Causes)+len(refs(e.AsyncOf, nil)) {
			t.Fatalf("%d edges counted for %d causes and async root %q", st.edges, len(e.Causes), e.AsyncOf)
		}
	})
}

func refs(asyncOf string, causes []eventgraph.Cause) []string {
	var out []string
	if asyncOf != "" {
		out = append(out, asyncOf)
	}
	for _, c := range causes {
		out = append(out, c.EventID)
	}
	return out
}
