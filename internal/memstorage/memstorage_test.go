package memstorage

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component"
)

func TestClientsAreIsolatedAndPersist(t *testing.T) {
	ctx := context.Background()
	ext := New()
	a, _ := ext.GetClient(ctx, component.KindExporter, component.MustNewID("loki"), "logs")
	b, _ := ext.GetClient(ctx, component.KindExporter, component.MustNewID("tempo"), "traces")
	if err := a.Set(ctx, "k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if v, _ := b.Get(ctx, "k"); v != nil {
		t.Fatalf("client b sees a's key: %q", v)
	}
	again, _ := ext.GetClient(ctx, component.KindExporter, component.MustNewID("loki"), "logs")
	if v, _ := again.Get(ctx, "k"); string(v) != "a" {
		t.Fatalf("a new client for the same component lost the key: %q", v)
	}
	if err := again.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if v, _ := a.Get(ctx, "k"); v != nil {
		t.Fatalf("Delete left %q", v)
	}
}
