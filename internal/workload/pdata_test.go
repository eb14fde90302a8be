package workload

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

func TestToPdataCarriesTheModel(t *testing.T) {
	gen, err := NewGenerator(Config{Scenarios: []Scenario{S1, S3}, Affected: 0.3, Requests: 50, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []*Request
	spans, logs := 0, 0
	for range 50 {
		r := gen.Next(time.Now())
		reqs = append(reqs, r)
		spans += len(r.Spans)
		logs += len(r.Logs)
	}
	td, ld := ToPdata(reqs)
	if td.SpanCount() != spans || ld.LogRecordCount() != logs {
		t.Fatalf("pdata has %d spans and %d logs, the model %d and %d", td.SpanCount(), ld.LogRecordCount(), spans, logs)
	}
	first := reqs[0].Spans[0]
	rs := td.ResourceSpans().At(0)
	span := rs.ScopeSpans().At(0).Spans().At(0)
	if span.TraceID().String() != first.Context.TraceID().String() || span.Name() != first.Name {
		t.Fatalf("first span %s %q, model %s %q", span.TraceID(), span.Name(), first.Context.TraceID(), first.Name)
	}
	if svc, _ := rs.Resource().Attributes().Get("service.name"); svc.Str() != first.Service.Name {
		t.Fatalf("resource service.name %q, model %q", svc.Str(), first.Service.Name)
	}
	failed := 0
	for _, rs := range td.ResourceSpans().All() {
		for _, s := range rs.ScopeSpans().At(0).Spans().All() {
			if s.Status().Code() == ptrace.StatusCodeError {
				failed++
			}
		}
	}
	if failed == 0 {
		t.Fatal("S3's failing task spans lost their error status")
	}
}
