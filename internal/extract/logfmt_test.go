package extract

import (
	"strconv"
	"strings"
	"testing"
)

func TestLogfmt(t *testing.T) {
	tests := []struct {
		line    string
		max     int
		want    string
		ok      bool
		limited Limited
	}{
		{
			line: "level=info stage=postproc/filter req_id=req-1715234890123-a1b2c3 output_length=0 filter_reason=empty_after_dedup",
			want: `level="info" stage="postproc/filter" req_id="req-1715234890123-a1b2c3" output_length="0" filter_reason="empty_after_dedup"`,
			ok:   true,
		},
		{
			line: `msg="user said \"hi\"" empty= path="a b" stray words x=1`,
			want: `msg="user said \"hi\"" empty="" path="a b" x="1"`,
			ok:   true,
		},
		{line: `a="unterminated value`, want: `a="unterminated value"`, ok: true},
		{line: "a=1\nb=2\tc=3", max: 2, want: `a="1" b="2"`, ok: true, limited: LimitedFields},
		{line: "[req-1715234890123-a1b2c3] normalized input tokens=523"},
		{line: "Traceback (most recent call last):\n  File \"x.py\", line 1"},
		{line: `{"level":"info"}`},
		{line: "http://host/x?a=b"},
		{line: ""},
	}
	for _, tt := range tests {
		max := tt.max
		if max == 0 {
			max = 64
		}
		fields, limited, ok := Logfmt(tt.line, max, nil)
		if ok != tt.ok || limited != tt.limited {
			t.Errorf("Logfmt(%q) ok = %v, limited = %b; want %v, %b", tt.line, ok, limited, tt.ok, tt.limited)
		}
		if got := strings.Join(flat(fields), " "); got != tt.want {
			t.Errorf("Logfmt(%q)\n got %s\nwant %s", tt.line, got, tt.want)
		}
	}
}

func FuzzLogfmt(f *testing.F) {
	for _, seed := range []string{
		"level=info stage=postproc/filter req_id=req-1715234890123-a1b2c3 output_length=0",
		`msg="a \"b\" c" x= y="\xff" z="open`, "plain text here", "a=b=c", "=x", "k=\"\\\"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fields, _, ok := Logfmt(line, 1<<20, nil)
		if ok != (len(fields) > 0) {
			t.Fatalf("Logfmt(%q): ok = %v with %d fields", line, ok, len(fields))
		}
		var rendered []string
		for _, f := range fields {
			if f.Key == "" || f.Start < 0 || f.End > len(line) || f.Start > f.End || line[f.Start-1] != '=' {
				t.Fatalf("Logfmt(%q): bad field %+v", line, f)
			}
			if raw := line[f.Start:f.End]; !strings.HasPrefix(raw, `"`) && raw != f.Str {
				t.Fatalf("Logfmt(%q): unquoted value %q at [%d,%d) but field says %q", line, raw, f.Start, f.End, f.Str)
			}
			rendered = append(rendered, f.Key+"="+strconv.Quote(f.Str))
		}
		// Rendering the fields as logfmt and parsing again gives the same fields.
		again, _, _ := Logfmt(strings.Join(rendered, " "), 1<<20, nil)
		if strings.Join(flat(again), " ") != strings.Join(flat(fields), " ") {
			t.Fatalf("Logfmt(%q) does not round-trip: %v then %v", line, flat(fields), flat(again))
		}
	})
}
