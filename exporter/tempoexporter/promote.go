package tempoexporter

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

// promoteGoldenFields copies the golden fields a resource carries onto each of
// its spans that lacks them, so span-scoped TraceQL ({ span.req_id = "…" })
// matches every span of a request. It returns the number of attributes written.
func promoteGoldenFields(td ptrace.Traces) int64 {
	var written int64
	var fields []string
	for _, rs := range td.ResourceSpans().All() {
		res := rs.Resource().Attributes()
		fields = fields[:0]
		for k := range res.All() {
			if golden.IsPerRecord(k) {
				fields = append(fields, k)
			}
		}
		if len(fields) == 0 {
			continue
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				attrs := span.Attributes()
				attrs.EnsureCapacity(attrs.Len() + len(fields))
				for _, k := range fields {
					if _, ok := attrs.Get(k); ok {
						continue
					}
					v, _ := res.Get(k)
					v.CopyTo(attrs.PutEmpty(k))
					written++
				}
			}
		}
	}
	return written
}
