package workload

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"
)

// lateSource is a Source of one span and one log per request, plus a Late
// log dated lateBy after the request's end.
type lateSource struct {
	svc    *Service
	n      int
	lateBy time.Duration
}

func (s *lateSource) Services() int { return 1 }

func (s *lateSource) Next(end time.Time) *Request {
	s.n++
	id := strconv.Itoa(s.n)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, byte(s.n >> 8), byte(s.n)}, SpanID: trace.SpanID{2, byte(s.n >> 8), byte(s.n)}})
	return &Request{
		Truth: Truth{ReqID: id, Scenario: Healthy, Start: end.Add(-time.Millisecond), End: end.Add(s.lateBy)},
		Spans: []Span{{Service: s.svc, Name: "work", Context: sc, Start: end.Add(-time.Millisecond), End: end,
			Events: []Event{{Name: "exception", Time: end, Attrs: []attribute.KeyValue{attribute.String("exception.type", "E"+id)}}}}},
		Logs: []Log{{Service: s.svc, Time: end, Severity: log.SeverityInfo, Body: "on-time " + id}},
		Late: []Log{{Service: s.svc, Time: end.Add(s.lateBy), Body: "late " + id}},
	}
}

// TestSendHoldsLateRecords: Send drives a Source other than the loom
// Generator, sends span events, and holds each Late record until the clock
// reaches its time: it arrives after every request generated before that time
// and before every request generated at or after it.
func TestSendHoldsLateRecords(t *testing.T) {
	s := startSink(t, true)
	src := &lateSource{svc: &Service{Name: "late-test", Instance: "late-test-0", Host: "h", Version: "1", Language: "go"}, lateBy: 25 * time.Millisecond}
	const requests = 400
	sum, err := Send(context.Background(), src, Pace{Requests: requests, Rate: 2000}, Target{Endpoint: s.GRPCEndpoint, Protocol: GRPC, Insecure: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Requests != requests || sum.Spans != requests || sum.Logs != 2*requests {
		t.Fatalf("summary %+v, want %d requests, %d spans, %d logs", sum, requests, requests, 2*requests)
	}
	type received struct {
		late bool
		at   time.Time
	}
	var stream []received
	for _, ld := range s.Logs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, rec := range sl.LogRecords().All() {
					stream = append(stream, received{strings.HasPrefix(rec.Body().Str(), "late "), rec.Timestamp().AsTime()})
				}
			}
		}
	}
	if len(stream) != 2*requests {
		t.Fatalf("sink received %d logs, want %d", len(stream), 2*requests)
	}
	held := 0
	for i, r := range stream {
		if !r.late {
			continue
		}
		for j, o := range stream {
			if o.late {
				continue
			}
			// Requests generated before a Late record's time come before it, the
			// others after it (those held when the run ends go last).
			if after := j > i; o.at.Before(r.at) == after {
				t.Fatalf("late record of %v arrived at position %d, a request generated at %v at %d", r.at, i, o.at, j)
			}
		}
		held++
	}
	events := 0
	for _, td := range s.Traces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, span := range rs.ScopeSpans().At(0).Spans().All() {
				if ev := span.Events(); ev.Len() == 1 && ev.At(0).Name() == "exception" {
					if v, _ := ev.At(0).Attributes().Get("exception.type"); v.Str() != "" {
						events++
					}
				}
			}
		}
	}
	if held != requests || events != requests {
		t.Fatalf("%d late records and %d span events arrived, want %d each", held, events, requests)
	}
}
