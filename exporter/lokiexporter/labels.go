package lokiexporter

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Loki's documented defaults for stream labels.
const (
	// maxLabelNames is max_label_names_per_series; Loki does not count service_name.
	maxLabelNames = 15
	// maxLabelValueBytes is max_label_value_length.
	maxLabelValueBytes = 2048

	labelServiceName = "service_name"
	labelLevel       = "level"
	// unknownService is what Loki itself derives when a stream has no service name.
	unknownService = "unknown_service"
)

type label struct{ name, value string }

// sanitizeLabelName maps an attribute name to a valid Loki label (and structured
// metadata) name the way Loki's own OTLP ingest does: every character outside
// [a-zA-Z0-9_] becomes '_', a leading digit gets a '_' prefix, and the reserved
// "__" prefix is cut to "_". So k8s.namespace.name becomes k8s_namespace_name.
func sanitizeLabelName(name string) string {
	if validLabelName(name) {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 1)
	for i, r := range name {
		if i == 0 && '0' <= r && r <= '9' {
			b.WriteByte('_')
		}
		if r < utf8.RuneSelf && isLabelChar(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	for strings.HasPrefix(s, "__") {
		s = s[1:]
	}
	if s == "" {
		return "_"
	}
	return s
}

func validLabelName(name string) bool {
	if name == "" || strings.HasPrefix(name, "__") || ('0' <= name[0] && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isLabelChar(name[i]) {
			return false
		}
	}
	return true
}

func isLabelChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// sanitizeValue makes a label or metadata value valid UTF-8 of at most maxBytes,
// cutting on a rune boundary.
func sanitizeValue(v string, maxBytes int) string {
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "\uFFFD")
	}
	if len(v) <= maxBytes {
		return v
	}
	cut := maxBytes
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut]
}

// appendLabelSet writes labels in the Prometheus text form that Loki parses,
// {a="1", b="2"}, skipping empty values. Callers pass labels sorted by name.
func appendLabelSet(dst []byte, labels []label) []byte {
	dst = append(dst, '{')
	first := true
	for _, l := range labels {
		if l.value == "" {
			continue
		}
		if !first {
			dst = append(dst, ", "...)
		}
		first = false
		dst = append(dst, l.name...)
		dst = append(dst, '=')
		dst = strconv.AppendQuote(dst, l.value)
	}
	return append(dst, '}')
}
