package tempoexporter

import (
	"context"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/tenant"
)

// splitByTenant returns td's resources per tenant (from the client metadata
// of ctx, the request's, else a resource attribute) and the number of spans
// dropped for an invalid tenant. When
// every resource has the same tenant, as in most batches, td itself is
// returned; otherwise the resources are moved, not copied, into one batch
// per tenant, leaving td empty.
func splitByTenant(ctx context.Context, td ptrace.Traces, cfg *tenant.Config) (map[string]ptrace.Traces, int64) {
	rss := td.ResourceSpans()
	ids := make([]string, rss.Len())
	valid := make([]bool, rss.Len())
	single := true
	for i, rs := range rss.All() {
		id, err := cfg.Of(ctx, rs.Resource().Attributes())
		ids[i], valid[i] = id, err == nil
		single = single && valid[i] && id == ids[0]
	}
	if single {
		if rss.Len() == 0 {
			return map[string]ptrace.Traces{}, 0
		}
		return map[string]ptrace.Traces{ids[0]: td}, 0
	}
	out := map[string]ptrace.Traces{}
	var dropped int64
	for i, rs := range rss.All() {
		if !valid[i] {
			dropped += int64(spanCount(rs))
			continue
		}
		t, ok := out[ids[i]]
		if !ok {
			t = ptrace.NewTraces()
			out[ids[i]] = t
		}
		rs.MoveTo(t.ResourceSpans().AppendEmpty())
	}
	return out, dropped
}

func spanCount(rs ptrace.ResourceSpans) int {
	n := 0
	for _, ss := range rs.ScopeSpans().All() {
		n += ss.Spans().Len()
	}
	return n
}
