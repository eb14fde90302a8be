package golden

import "testing"

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
