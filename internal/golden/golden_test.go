package golden

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
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

func TestHashInputWith(t *testing.T) {
	if HashInputWith("Hello  World", NormalizeLowercase) != HashInput("hello world") {
		t.Error("lowercase normalization must fold case and collapse whitespace")
	}
	if HashInputWith(" a ", NormalizeNone) == HashInput("a") {
		t.Error("no normalization must keep surrounding whitespace")
	}
	for _, n := range []InputNormalization{NormalizeWhitespace, NormalizeLowercase, NormalizeNone} {
		if !n.Valid() {
			t.Errorf("%q not valid", n)
		}
	}
	if InputNormalization("trim").Valid() {
		t.Error("unknown normalization accepted")
	}
}

func TestDefaultAliasesAreCanonical(t *testing.T) {
	aliases := DefaultAliases()
	for _, alias := range []string{"request_id", "x_request_id", "llm.request_id", "inference_id"} {
		if aliases[alias] != ReqID {
			t.Errorf("%s -> %q, want %s", alias, aliases[alias], ReqID)
		}
	}
	for _, alias := range []string{"model", "model_name", "gen_ai.request.model", "llm.model_name"} {
		if aliases[alias] != ModelVer {
			t.Errorf("%s -> %q, want %s", alias, aliases[alias], ModelVer)
		}
	}
	if aliases["duration_ms"] != LatencyMs || aliases["latency_ms"] != LatencyMs {
		t.Error("duration_ms and latency_ms must map to resource_usage.latency_ms")
	}
	for alias, canonical := range aliases {
		if _, chained := aliases[canonical]; chained {
			t.Errorf("%s -> %s is itself an alias: tables must map to canonical names in one step", alias, canonical)
		}
	}
	aliases["mine"] = ReqID
	if _, shared := DefaultAliases()["mine"]; shared {
		t.Error("DefaultAliases must return a fresh copy")
	}
	if !KeepsSource("gen_ai.request.model") || KeepsSource("model_name") {
		t.Error("only gen_ai.* sources stay in place")
	}
}

func FuzzHashInput(f *testing.F) {
	for _, seed := range []string{"", "  hello \n\t world ", "\u00a0x\u0085y", "\xff\xfe a", "Ünïcode  TEXT"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, input string) {
		want := sha256.Sum256([]byte(NormalizeInput(input)))
		if got := HashInput(input); got != hex.EncodeToString(want[:InputHashLen/2]) {
			t.Fatalf("HashInput(%q) = %s disagrees with sha256(NormalizeInput)", input, got)
		}
		want = sha256.Sum256([]byte(strings.ToLower(NormalizeInput(input))))
		if got := HashInputWith(input, NormalizeLowercase); got != hex.EncodeToString(want[:InputHashLen/2]) {
			t.Fatalf("HashInputWith(%q, lowercase) = %s disagrees with sha256(ToLower(NormalizeInput))", input, got)
		}
		if HashInputWith(input, NormalizeLowercase) != HashInputWith(strings.ToLower(input), NormalizeLowercase) && utf8.ValidString(input) {
			t.Fatalf("lowercase normalization of %q depends on case", input)
		}
	})
}

func TestFilledMakesTheOutcomeTrue(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutBool(ValidAttr, false)
	attrs.PutEmptySlice(MissingAttr).AppendEmpty().SetStr(ReqID)
	Filled(attrs, ReqID)
	valid, _ := attrs.Get(ValidAttr)
	_, missing := attrs.Get(MissingAttr)
	if !valid.Bool() || missing {
		t.Fatalf("req_id filled: %v", attrs.AsRaw())
	}

	attrs = pcommon.NewMap()
	attrs.PutBool(ValidAttr, false)
	m := attrs.PutEmptySlice(MissingAttr)
	m.AppendEmpty().SetStr(ReqID)
	m.AppendEmpty().SetStr(Stage)
	Filled(attrs, ReqID)
	valid, _ = attrs.Get(ValidAttr)
	got, _ := attrs.Get(MissingAttr)
	if valid.Bool() || got.Slice().Len() != 1 || got.Slice().At(0).Str() != Stage {
		t.Fatalf("stage still missing: %v", attrs.AsRaw())
	}

	attrs = pcommon.NewMap()
	Filled(attrs, ReqID)
	if attrs.Len() != 0 {
		t.Fatalf("a record no validator saw is left alone: %v", attrs.AsRaw())
	}
}
