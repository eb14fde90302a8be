package tempoexporter

import (
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/tenant"
)

// splitByTenant returns td's spans per tenant and the number of spans dropped
// for an invalid tenant. When every span has the same tenant, as in most
// batches, td itself is returned; otherwise the spans are moved, not copied,
// into one batch per tenant, leaving td's spans empty.
func splitByTenant(td ptrace.Traces, cfg *tenant.Config) (map[string]ptrace.Traces, int64) {
	first, single := "", true
	seen := false
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				id, err := cfg.Of(span.Attributes(), rs.Resource().Attributes())
				switch {
				case err != nil:
					single = false
				case !seen:
					first, seen = id, true
				case id != first:
					single = false
				}
			}
		}
	}
	if single {
		if !seen {
			return map[string]ptrace.Traces{}, 0
		}
		return map[string]ptrace.Traces{first: td}, 0
	}

	out := map[string]ptrace.Traces{}
	var dropped int64
	for _, rs := range td.ResourceSpans().All() {
		resOf := map[string]ptrace.ResourceSpans{} // this resource's copy per tenant
		for _, ss := range rs.ScopeSpans().All() {
			scopeOf := map[string]ptrace.ScopeSpans{} // this scope's copy per tenant
			for _, span := range ss.Spans().All() {
				id, err := cfg.Of(span.Attributes(), rs.Resource().Attributes())
				if err != nil {
					dropped++
					continue
				}
				dest, ok := scopeOf[id]
				if !ok {
					r, ok := resOf[id]
					if !ok {
						r = appendResource(out, id, rs)
						resOf[id] = r
					}
					dest = r.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(dest.Scope())
					dest.SetSchemaUrl(ss.SchemaUrl())
					scopeOf[id] = dest
				}
				span.MoveTo(dest.Spans().AppendEmpty())
			}
		}
	}
	return out, dropped
}

// appendResource adds a copy of rs's resource, without spans, to the tenant's output.
func appendResource(out map[string]ptrace.Traces, id string, rs ptrace.ResourceSpans) ptrace.ResourceSpans {
	t, ok := out[id]
	if !ok {
		t = ptrace.NewTraces()
		out[id] = t
	}
	r := t.ResourceSpans().AppendEmpty()
	rs.Resource().CopyTo(r.Resource())
	r.SetSchemaUrl(rs.SchemaUrl())
	return r
}
