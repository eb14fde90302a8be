package golden

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestReqIDRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	created := time.UnixMilli(1715234890123)
	id := NewReqID(created, rng)
	if len(id) != len("req-1715234890123-a1b2c3") {
		t.Fatalf("NewReqID = %q: wrong length", id)
	}
	got, ok := ParseReqID(id)
	if !ok || !got.Equal(created) {
		t.Fatalf("ParseReqID(%q) = %v, %v; want %v, true", id, got, ok, created)
	}
}

func TestParseReqIDRejects(t *testing.T) {
	for _, id := range []string{
		"",
		"req-1715234890123-a1b2c",  // short suffix
		"req-1715234890123-A1B2C3", // upper case
		"req_1715234890123_a1b2c3", // other separators: a configured format, not the default
		"req-17152348901x3-a1b2c3", // non-digit in the time
		"req-1715234890123xa1b2c3", // missing dash
		"req-celery-0f8fad5b-d9cb-469f-a165-70867728950e",
		"rex-1715234890123-a1b2c3",
	} {
		if _, ok := ParseReqID(id); ok {
			t.Errorf("ParseReqID(%q) accepted an id outside the default format", id)
		}
	}
}

func TestHashInput(t *testing.T) {
	// sha256("hello world") = b94d27b9...
	if got := HashInput("  hello \n\t world "); got != "b94d27b9" {
		t.Fatalf("HashInput = %q, want b94d27b9", got)
	}
	if HashInput("a b") == HashInput("ab") {
		t.Fatal("whitespace between words must still matter")
	}
}

func FuzzParseReqID(f *testing.F) {
	for _, seed := range []string{"req-1715234890123-a1b2c3", "req-", "req-9999999999999-zzzzzz", "req-\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		created, ok := ParseReqID(id)
		if !ok {
			return
		}
		// An accepted id must round-trip its embedded time exactly.
		if got := fmt.Sprintf("%013d", created.UnixMilli()); got != id[4:17] {
			t.Fatalf("ParseReqID(%q) time = %s", id, got)
		}
	})
}
