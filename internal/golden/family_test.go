package golden

import (
	"regexp"
	"testing"
)

func TestModelFamily(t *testing.T) {
	for name, want := range map[string]string{
		"llama3-8b-v2.1.4":           "llama3-8b",
		"mixtral-8x7b-instruct-v0.1": "mixtral-8x7b-instruct",
		"phi3-mini-128k-v3.2":        "phi3-mini-128k",
		"sdxl-turbo-v1.0":            "sdxl-turbo",
		"embedder_v2":                "embedder",
		"ranker@1.3.0":               "ranker",
		"gpt-4o-2024-08-06":          "gpt-4o",
		"qwen2-7b-chat":              "qwen2-7b-chat",
		"llama3-8b":                  "llama3-8b",
		"v2":                         "v2",
		"":                           "",
	} {
		if got := ModelFamily(name); got != want {
			t.Errorf("ModelFamily(%q) = %q, want %q", name, got, want)
		}
	}
}

// versionSuffix is the regular expression ModelFamily's documentation
// describes, the reference its single pass must agree with.
var versionSuffix = regexp.MustCompile(`(?i)^(.+?)(?:[-_@:]v\d+(?:\.\d+)*(?:[-.+][0-9a-z]+)*|[-_@:]\d+(?:\.\d+)+(?:[-.+][0-9a-z]+)*|[-_]\d{4}-?\d{2}-?\d{2})$`)

func familyByRegexp(modelVer string) string {
	if m := versionSuffix.FindStringSubmatch(modelVer); m != nil {
		return m[1]
	}
	return modelVer
}

func FuzzModelFamily(f *testing.F) {
	for _, seed := range []string{
		"llama3-8b-v2.1.4", "ranker@1.3.0", "gpt-4o-2024-08-06", "x_20240806", "a-2024-0806", "a-202408-06",
		"m-v1.2a", "m-1.2a", "m-v1.2.rc1", "m:2.0-rc1", "a-v1-v2--", "a--v1", "-v1", "a-v1.", "a\n-v1", "é-v1",
		"m-V2+build.7", "m_1.2.3", "m-2024--0806", "a-1-1-1-1", "a-v1-v1-v1-v1-x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, modelVer string) {
		if got, want := ModelFamily(modelVer), familyByRegexp(modelVer); got != want {
			t.Fatalf("ModelFamily(%q) = %q, the regular expression gives %q", modelVer, got, want)
		}
	})
}

func BenchmarkModelFamily(b *testing.B) {
	names := []string{"llama3-8b-v2.1.4", "gpt-4o-2024-08-06", "qwen2-7b-chat", "ranker@1.3.0"}
	b.Run("regexp", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			familyByRegexp(names[i%len(names)])
		}
	})
	b.Run("ModelFamily", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			ModelFamily(names[i%len(names)])
		}
	})
}
