package tempoexporter

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/tenant"
)

func TestSplitByTenantSingle(t *testing.T) {
	td := testTraces()
	cfg := &tenant.Config{FromAttribute: "tenant_id", Default: "shared"}
	got, dropped := splitByTenant(context.Background(), td, cfg)
	require.Len(t, got, 1)
	assert.Zero(t, dropped)
	got["shared"].ResourceSpans().AppendEmpty()
	assert.Equal(t, 3, td.ResourceSpans().Len(), "one tenant: the batch itself, not a copy")

	empty, _ := splitByTenant(context.Background(), ptrace.NewTraces(), cfg)
	assert.Empty(t, empty)
}

func TestSplitByTenant(t *testing.T) {
	td := testTraces()
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("tenant_id", "team-a")
	// A span attribute never picks the tenant: only the resource's, set by a trusted tier.
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).Attributes().PutStr("tenant_id", "team-b")
	td.ResourceSpans().At(1).Resource().Attributes().PutStr("tenant_id", "a|b")
	worker := td.ResourceSpans().AppendEmpty()
	worker.Resource().Attributes().PutStr("service.name", "worker")
	worker.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("job")

	got, dropped := splitByTenant(context.Background(), td, &tenant.Config{FromAttribute: "tenant_id", Default: "shared"})
	assert.Equal(t, int64(td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().Len()), dropped)
	names := map[string][]string{}
	for id, part := range got {
		for _, rs := range part.ResourceSpans().All() {
			service, _ := rs.Resource().Attributes().Get("service.name")
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					names[id] = append(names[id], service.Str()+"/"+span.Name())
				}
			}
		}
	}
	assert.Equal(t, map[string][]string{
		"team-a": {"model/forward", "model/decode"},
		"shared": {"worker/job"},
	}, names)
}

func BenchmarkSplitByTenant(b *testing.B) {
	cfg := &tenant.Config{FromAttribute: "tenant_id"}
	for _, tenants := range []int{1, 4} {
		b.Run(fmt.Sprintf("%d-tenants", tenants), func(b *testing.B) {
			td := benchTraces()
			for i, rs := range td.ResourceSpans().All() {
				rs.Resource().Attributes().PutStr("tenant_id", fmt.Sprintf("team-%d", i%tenants))
			}
			for b.Loop() {
				clone := ptrace.NewTraces()
				td.CopyTo(clone) // the split moves spans out of its input
				splitByTenant(context.Background(), clone, cfg)
			}
			b.ReportMetric(float64(benchSpans*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
