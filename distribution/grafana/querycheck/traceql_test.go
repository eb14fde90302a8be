package querycheck

import (
	"slices"
	"testing"
)

// Queries from Tempo's TraceQL documentation, and Loom's pivots.
var validTraceQL = []string{
	`{ span.req_id = "req-1715234890123-a1b2c3" }`,
	`{ .http.status_code >= 500 && resource.service.name = "model" }`,
	`{ span.http.method = "GET" && status = ok }`,
	`{ duration > 2s } && { span.stage = "cache/miss" }`,
	`{ resource.service.name = "gateway" } >> { status = error }`,
	`{ name =~ "model/.*" || kind = server }`,
	`{ !(span.golden.valid = true) }`,
	`{ span."name with space" = "x" }`,
	`{ span.sampling.policy != nil }`,
	`{ span.a + span.b > 10 }`,
	`{ (span.a + span.b) > 10 }`,
	`{ trace:rootService = "gateway" && span:kind = client }`,
	`{}`,
	`{ true }`,
	`{ status = error } | count() > 2`,
	`{ span.stage = "model/forward" } | avg(duration) > 1s`,
	`{ status = error } | by(resource.service.name) | count() > 1`,
	`{ .req_id != nil } | select(span.stage, span.input_hash)`,
	`{ resource.service.name = "model" } | rate() by (span.stage)`,
	`{ } | quantile_over_time(duration, .5, .99) by (resource.service.name)`,
	`({ .a = 1 } && { .b = 2 }) || { .c = 3 }`,
	`{ span.ratio < -0.5 }`,
}

var invalidTraceQL = map[string]string{
	`span.req_id = "x"`:         `expected "{"`,
	`{ span.req_id = "x"`:       `expected "}"`,
	`{ span.req_id }`:           "comparison",
	`{ req_id = "x" }`:          "scoped attribute",
	`{ spam.req_id = "x" }`:     "scoped attribute",
	`{ span.req_id == "x" }`:    "attribute, intrinsic or value",
	`{ span.x =~ "(" }`:         "regular expression",
	`{ duration > 2 seconds }`:  `expected "}"`,
	`{ .a = 1 } | count()`:      "compared with a value",
	`{ .a = 1 } | by()`:         "at least one attribute",
	`{ .a = 1 } | frobnicate()`: "unknown pipeline stage",
	`{ .a = "unterminated }`:    "unterminated",
	`{ .a = 1 } &&`:             `expected "{"`,
	`{ . = 1 }`:                 "attribute name",
}

func TestParseTraceQL(t *testing.T) {
	checkGrammar(t, "ParseTraceQL", func(q string) error { _, err := ParseTraceQL(q); return err }, validTraceQL, invalidTraceQL)
}

func TestTraceQLNames(t *testing.T) {
	got, err := ParseTraceQL(`{ span.req_id = "x" && .input_hash != nil && resource.service.name = "m" && duration > 1s } | by(span.stage)`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Attributes, []string{".input_hash", "resource.service.name", "span.req_id", "span.stage"}) ||
		!slices.Equal(got.Intrinsics, []string{"duration"}) {
		t.Errorf("names: %+v", got)
	}
}

func FuzzParseTraceQL(f *testing.F) {
	for _, q := range validTraceQL {
		f.Add(q)
	}
	for q := range invalidTraceQL {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if got, err := ParseTraceQL(q); err == nil && got == nil {
			t.Fatalf("ParseTraceQL(%q) returned neither names nor an error", q)
		}
	})
}
