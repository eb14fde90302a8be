package tenant

import (
	"errors"
	"strings"
	"testing"

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

	got, err := cfg.Of(resource)
	if got != "shared" || err != nil {
		t.Fatalf("no attribute: Of = %q, %v; want the default", got, err)
	}
	resource.PutStr("tenant_id", "from-resource")
	if got, _ = cfg.Of(resource); got != "from-resource" {
		t.Fatalf("resource attribute: Of = %q", got)
	}
	resource.PutStr("tenant_id", "../admin")
	if _, err = cfg.Of(resource); !errors.Is(err, ErrInvalid) {
		t.Fatalf("hostile tenant: err = %v, want ErrInvalid", err)
	}
	resource.PutInt("tenant_id", 42)
	if got, _ = cfg.Of(resource); got != "42" {
		t.Fatalf("numeric tenant: Of = %q", got)
	}
}

func TestCheck(t *testing.T) {
	if err := (&Config{Default: "a/b"}).Check("tenant"); err == nil || !strings.HasPrefix(err.Error(), `tenant::default: "a/b" is not a valid tenant id`) {
		t.Fatalf("Check = %v, want an error naming the key tenant::default", err)
	}
	if err := (&Config{}).Check("tenant"); err != nil {
		t.Fatal(err)
	}
}
