package lokiexporter

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestSanitizeLabelName(t *testing.T) {
	for in, want := range map[string]string{
		"level":              "level",
		"k8s.namespace.name": "k8s_namespace_name",
		"event.id":           "event_id",
		"9lives":             "_9lives",
		"__reserved":         "_reserved",
		"___x":               "_x",
		"":                   "_",
		"a-b c":              "a_b_c",
		"modèle":             "mod_le",
		"bad\xffbyte":        "bad_byte",
	} {
		got := sanitizeLabelName(in)
		assert.Equal(t, want, got, "sanitizeLabelName(%q)", in)
		assert.True(t, validLabelName(got), "sanitizeLabelName(%q) = %q is invalid", in, got)
	}
}

func TestSanitizeValue(t *testing.T) {
	assert.Equal(t, "ok", sanitizeValue("ok", 10))
	assert.Equal(t, "a\uFFFDb", sanitizeValue("a\xffb", 10))
	cut := sanitizeValue(strings.Repeat("é", 10), 5) // 2-byte runes: never split one
	assert.Equal(t, "éé", cut)
	assert.True(t, utf8.ValidString(cut))
}

func TestAppendLabelSet(t *testing.T) {
	got := appendLabelSet(nil, []label{
		{"level", "info"},
		{"model_ver", ""}, // empty: left out
		{"service_name", `we"ird\name` + "\n"},
	})
	assert.Equal(t, `{level="info", service_name="we\"ird\\name\n"}`, string(got))
}

func BenchmarkAppendLabelSet(b *testing.B) {
	labels := []label{{"k8s_namespace_name", "inference"}, {"level", "info"}, {"model_ver", "llama3-8b-v2.1.4"}, {"service_name", "model"}}
	var buf []byte
	for b.Loop() {
		buf = appendLabelSet(buf[:0], labels)
	}
	b.ReportMetric(float64(len(buf)), "B/record")
}
