package tenant

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestValid(t *testing.T) {
	for _, id := range []string{"a", "team-a", "Org_1", "x.y", "!*'()", strings.Repeat("a", 150)} {
		if !Valid(id) {
			t.Errorf("Valid(%q) = false", id)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "a b", "a|b", "ä", "a\x00", strings.Repeat("a", 151), "\xff"} {
		if Valid(id) {
			t.Errorf("Valid(%q) = true", id)
		}
	}
}

func TestOf(t *testing.T) {
	cfg := Config{FromAttribute: "tenant_id", Default: "shared"}
	resource := pcommon.NewMap()

	got, err := cfg.Of(context.Background(), resource)
	if got != "shared" || err != nil {
		t.Fatalf("no attribute: Of = %q, %v; want the default", got, err)
	}
	resource.PutStr("tenant_id", "from-resource")
	if got, _ = cfg.Of(context.Background(), resource); got != "from-resource" {
		t.Fatalf("resource attribute: Of = %q", got)
	}
	resource.PutStr("tenant_id", "../admin")
	if _, err = cfg.Of(context.Background(), resource); !errors.Is(err, ErrInvalid) {
		t.Fatalf("hostile tenant: err = %v, want ErrInvalid", err)
	}
	resource.PutInt("tenant_id", 42)
	if got, _ = cfg.Of(context.Background(), resource); got != "42" {
		t.Fatalf("numeric tenant: Of = %q", got)
	}
}

// withMetadata is the context of a request that came with the given headers.
func withMetadata(headers map[string][]string) context.Context {
	return client.NewContext(context.Background(), client.Info{Metadata: client.NewMetadata(headers)})
}

func TestOfClientMetadata(t *testing.T) {
	cfg := Config{FromMetadata: "x-scope-orgid", FromAttribute: "tenant_id", Default: "shared"}
	resource := pcommon.NewMap()
	resource.PutStr("tenant_id", "from-resource")

	got, err := cfg.Of(withMetadata(map[string][]string{"x-scope-orgid": {"team-a"}}), resource)
	if got != "team-a" || err != nil {
		t.Fatalf("header and attribute: Of = %q, %v; want the header's team-a", got, err)
	}
	// Receivers keep HTTP headers in canonical case; client.NewMetadata lowercases them.
	if got, _ = cfg.Of(withMetadata(map[string][]string{"X-Scope-Orgid": {"team-a"}}), resource); got != "team-a" {
		t.Fatalf("header in canonical case: Of = %q, want team-a", got)
	}
	if got, _ = (&Config{FromMetadata: "X-Scope-OrgID"}).Of(withMetadata(map[string][]string{"x-scope-orgid": {"team-a"}}), resource); got != "team-a" {
		t.Fatalf("key configured in mixed case: Of = %q, want team-a", got)
	}
	if got, _ = cfg.Of(withMetadata(map[string][]string{"authorization": {"Bearer x"}}), resource); got != "from-resource" {
		t.Fatalf("without the header: Of = %q, want the attribute", got)
	}
	if got, _ = cfg.Of(context.Background(), pcommon.NewMap()); got != "shared" {
		t.Fatalf("neither: Of = %q, want the default", got)
	}

	for name, values := range map[string][]string{
		"invalid":      {"../admin"},
		"empty":        {""},
		"multi-valued": {"team-a", "team-b"},
	} {
		if got, err = cfg.Of(withMetadata(map[string][]string{"x-scope-orgid": values}), resource); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s header: Of = %q, %v; want ErrInvalid, never the attribute or the default", name, got, err)
		}
	}

	resource.PutStr("tenant_id", "team-b")
	if got, _ = (&Config{FromAttribute: "tenant_id"}).Of(withMetadata(map[string][]string{"x-scope-orgid": {"team-a"}}), resource); got != "team-b" {
		t.Fatalf("from_metadata unset: Of = %q; the header must not be read", got)
	}
}

func TestCheck(t *testing.T) {
	if err := (&Config{Default: "a/b"}).Check("tenant"); err == nil || !strings.HasPrefix(err.Error(), `tenant::default: "a/b" is not a valid tenant id`) {
		t.Fatalf("Check = %v, want an error naming the key tenant::default", err)
	}
	if err := (&Config{FromMetadata: "x scope"}).Check("tenant"); err == nil || !strings.HasPrefix(err.Error(), `tenant::from_metadata: "x scope" is not a valid header name`) {
		t.Fatalf("Check = %v, want an error naming the key tenant::from_metadata", err)
	}
	if err := (&Config{FromMetadata: "x-scope-orgid", Default: "shared"}).Check("tenant"); err != nil {
		t.Fatal(err)
	}
	if err := (&Config{}).Check("tenant"); err != nil {
		t.Fatal(err)
	}
}

func TestCheckBatching(t *testing.T) {
	batched := func(partitionKeys ...string) configoptional.Optional[exporterhelper.QueueBatchConfig] {
		queue := exporterhelper.NewDefaultQueueConfig()
		queue.Batch = configoptional.Some(exporterhelper.BatchConfig{})
		queue.Batch.Get().Partition.MetadataKeys = partitionKeys
		return configoptional.Some(queue)
	}
	cfg := Config{FromMetadata: "x-scope-orgid"}
	if err := cfg.CheckBatching("tenant", batched()); err == nil || !strings.HasPrefix(err.Error(), `tenant::from_metadata: "x-scope-orgid" must be in sending_queue::batch::partition::metadata_keys`) {
		t.Fatalf("CheckBatching = %v, want an error naming tenant::from_metadata and the fix", err)
	}
	if err := cfg.CheckBatching("tenant", batched("authorization", "X-Scope-OrgID")); err != nil {
		t.Fatalf("partitioned by the key in another case: %v", err)
	}
	if err := cfg.CheckBatching("tenant", configoptional.None[exporterhelper.QueueBatchConfig]()); err != nil {
		t.Fatalf("no queue, so no merged batches: %v", err)
	}
	if err := (&Config{FromAttribute: "tenant_id"}).CheckBatching("tenant", batched()); err != nil {
		t.Fatalf("no from_metadata: %v", err)
	}
}
