package workload

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loom-otel/loom/internal/otlpsink"
)

func startSink(tb testing.TB, keep bool) *otlpsink.Sink {
	tb.Helper()
	s, err := otlpsink.Start(keep)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

func sinkCounts(s *otlpsink.Sink) (spans, logs int) {
	c := s.Counts()
	return c.Spans, c.LogRecords
}

// startRejectingHTTPSink answers every OTLP/HTTP export with status.
func startRejectingHTTPSink(tb testing.TB, status int) string {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "rejected by the test sink", status)
	}))
	tb.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
