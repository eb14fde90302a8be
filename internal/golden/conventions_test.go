package golden

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestConventionsTableMatchesREADME keeps the documented table and the
// mapping the processor applies the same.
func TestConventionsTableMatchesREADME(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]+)` \\|([^|]*)\\|")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		documented[m[1]] = m[2]
		a, ok := AliasOf(m[1])
		switch conversion := strings.TrimSpace(m[3]); {
		case !ok:
			t.Errorf("README documents %s, which aliases.go does not map", m[1])
		case a.Canonical != m[2]:
			t.Errorf("%s: README says %s, aliases.go %s", m[1], m[2], a.Canonical)
		case (a.Scale == 1000) != strings.Contains(conversion, "s → ms"),
			a.Preferred != strings.Contains(conversion, "preferred"),
			(len(a.TrimPrefix) > 0) != strings.Contains(conversion, "prefix cut"):
			t.Errorf("%s: README's conversion %q does not match %+v", m[1], conversion, a)
		}
	}
	for _, source := range slices.Sorted(maps.Keys(conventions)) {
		if _, ok := documented[source]; !ok {
			t.Errorf("aliases.go maps %s, which README's table lacks", source)
		}
	}
}

func TestConventionTargetsAreCanonical(t *testing.T) {
	aliases := DefaultAliases()
	for source, a := range conventions {
		if _, chained := aliases[a.Canonical]; chained {
			t.Errorf("%s maps to %s, which is itself an alias", source, a.Canonical)
		}
		if a.Scale != 0 && !IsResourceUsage(a.Canonical) {
			t.Errorf("%s is scaled into %s, which is not a number", source, a.Canonical)
		}
		if _, plain := plainAliases[source]; plain {
			t.Errorf("%s is both a plain alias and a convention", source)
		}
	}
}

func TestAliasOf(t *testing.T) {
	if a, ok := AliasOf("gen_ai.latency.time_to_first_token"); !ok || a.Canonical != TTFTMs || a.Scale != 1000 {
		t.Errorf("AliasOf(ttft) = %+v, %v", a, ok)
	}
	if a, ok := AliasOf("request_id"); !ok || a.Canonical != ReqID || a.Scale != 0 {
		t.Errorf("AliasOf(request_id) = %+v, %v", a, ok)
	}
	if _, ok := AliasOf("no.such.alias"); ok {
		t.Error("AliasOf found an alias that is not in the table")
	}
}

func TestTPOT(t *testing.T) {
	for _, tt := range []struct {
		latency, ttft float64
		tokens        int64
		want          float64
		ok            bool
	}{
		{880, 80, 41, 20, true},
		{100, 100, 2, 0, true},
		{100, 50, 1, 0, false},  // one token: nothing after the first
		{50, 100, 10, 0, false}, // TTFT after the end: inconsistent
		{100, -1, 10, 0, false},
	} {
		got, ok := TPOT(tt.latency, tt.ttft, tt.tokens)
		if ok != tt.ok || got != tt.want {
			t.Errorf("TPOT(%v, %v, %v) = %v, %v; want %v, %v", tt.latency, tt.ttft, tt.tokens, got, ok, tt.want, tt.ok)
		}
	}
}
