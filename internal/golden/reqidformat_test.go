package golden

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestReqIDFormatMatch(t *testing.T) {
	tests := []struct {
		template string
		id       string
		ok       bool
		created  time.Time
	}{
		{DefaultReqIDFormat, "req-1715234890123-a1b2c3", true, time.UnixMilli(1715234890123)},
		{DefaultReqIDFormat, "req-1715234890123-a1b2c", false, time.Time{}},
		{"req-celery-{uuid}", "req-celery-0f8fad5b-d9cb-469f-a165-70867728950e", true, time.Time{}},
		{"req-celery-{uuid}", "req-celery-0F8FAD5B-d9cb-469f-a165-70867728950e", false, time.Time{}},
		{"req-celery-{uuid}", "req-celery-0f8fad5b", false, time.Time{}},
		{"req_{ts}_{hex}", "req_1715234890123_deadbeef", true, time.UnixMilli(1715234890123)},
		{"req_{ts}_{hex}", "req_1715234890123_", false, time.Time{}},
		{"req_{ts}_{hex}", "req_1715234890123_xyz", false, time.Time{}},
		{"job.{digits:4}", "job.1234", true, time.Time{}},
		{"job.{digits:4}", "jobx1234", false, time.Time{}}, // literal dot is not a regex wildcard
		{"{alnum}", strings.Repeat("a", maxReqIDLen+1), false, time.Time{}},
	}
	for _, tt := range tests {
		f, err := CompileReqIDFormat(tt.template)
		if err != nil {
			t.Fatalf("CompileReqIDFormat(%q): %v", tt.template, err)
		}
		created, ok := f.Match(tt.id)
		if ok != tt.ok || !created.Equal(tt.created) {
			t.Errorf("%q.Match(%q) = %v, %v; want %v, %v", tt.template, tt.id, created, ok, tt.created, tt.ok)
		}
	}
}

func TestCompileReqIDFormatErrors(t *testing.T) {
	for template, want := range map[string]string{
		"":                 "empty",
		"req-{guid}":       "unknown placeholder {guid}",
		"req-{uuid:4}":     "fixed length",
		"req-{hex:0}":      "length of {hex}",
		"req-{ts}-{ts}":    "more than one time placeholder",
		"req-{Hex}":        "brace outside a placeholder",
		"req-{unix_ms":     "brace outside a placeholder",
		"req-}{unix_ms}-x": "brace outside a placeholder",
	} {
		_, err := CompileReqIDFormat(template)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CompileReqIDFormat(%q) error = %v; want it to mention %q", template, err, want)
		}
	}
}

// The template of the default format and the hand-written ParseReqID must agree.
func TestDefaultReqIDFormatAgreesWithParseReqID(t *testing.T) {
	f, err := CompileReqIDFormat(DefaultReqIDFormat)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ids := []string{"req-1715234890123-A1B2C3", "req_1715234890123_a1b2c3", "req-171523489012-a1b2c3d"}
	for range 100 {
		ids = append(ids, NewReqID(time.UnixMilli(rng.Int64N(1e13)), rng))
	}
	for _, id := range ids {
		c1, ok1 := ParseReqID(id)
		c2, ok2 := f.Match(id)
		if ok1 != ok2 || !c1.Equal(c2) {
			t.Errorf("%q: ParseReqID = %v, %v; format = %v, %v", id, c1, ok1, c2, ok2)
		}
	}
}

func TestReqIDMatcher(t *testing.T) {
	m, err := NewReqIDMatcher([]string{"req-celery-{uuid}"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Parse("req-1715234890123-a1b2c3"); !ok {
		t.Error("default format rejected")
	}
	if _, ok := m.Parse("req-celery-0f8fad5b-d9cb-469f-a165-70867728950e"); !ok {
		t.Error("configured format rejected")
	}
	if _, ok := m.Parse("req_1715234890123_a1b2c3"); ok {
		t.Error("unconfigured format accepted")
	}
	if _, err := NewReqIDMatcher([]string{"ok-{hex}", "bad-{x}"}); err == nil || !strings.Contains(err.Error(), "bad-{x}") {
		t.Errorf("error %v should name the failing template", err)
	}
}

func FuzzReqIDFormat(f *testing.F) {
	f.Add("req-celery-{uuid}", "req-celery-0f8fad5b-d9cb-469f-a165-70867728950e")
	f.Add("req_{ts}_{hex}", "req_1715234890123_ab")
	f.Add("{alnum:3}{digits}", "abc123")
	f.Add("a{", "a{")
	f.Fuzz(func(t *testing.T, template, id string) {
		format, err := CompileReqIDFormat(template)
		if err != nil {
			return
		}
		if _, ok := format.Match(id); ok && len(id) > maxReqIDLen {
			t.Fatalf("%q accepted an id longer than %d bytes", template, maxReqIDLen)
		}
	})
}
