package foundry

import (
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/workload"
)

var testEnd = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// generate returns n requests of cfg (Requests = n) and the generator.
func generate(t *testing.T, cfg Config, n int) ([]*workload.Request, *Generator) {
	t.Helper()
	cfg.Requests = n
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*workload.Request, n)
	for i := range out {
		out[i] = g.Next(testEnd.Add(time.Duration(i) * 10 * time.Millisecond))
	}
	return out, g
}

func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spansAt(r *workload.Request, stage string) []workload.Span {
	var out []workload.Span
	for _, s := range r.Spans {
		if v, _ := attr(s.Attrs, golden.Stage); v.AsString() == stage {
			out = append(out, s)
		}
	}
	return out
}

func allLogs(r *workload.Request) []workload.Log { return slices.Concat(r.Logs, r.Late) }

// canonical is the attribute name after goldenfield's alias normalization.
func canonical(key string) string {
	if c, ok := aliases[key]; ok {
		return c
	}
	return key
}

var aliases = golden.DefaultAliases()

// resourceValue reads the resource attributes the emitter writes for svc.
func resourceValue(svc *workload.Service, key string) (string, bool) {
	switch key {
	case "service.name":
		return svc.Name, true
	case "service.instance.id":
		return svc.Instance, true
	case "host.name":
		return svc.Host, true
	}
	return "", false
}

// carries reports whether any span of r (its attributes after alias
// normalization, or its resource) has key=value.
func carries(r *workload.Request, key, value string) bool {
	for _, s := range r.Spans {
		if v, ok := resourceValue(s.Service, key); ok && v == value {
			return true
		}
		for _, kv := range s.Attrs {
			if canonical(string(kv.Key)) == key && kv.Value.String() == value {
				return true
			}
		}
	}
	return false
}

// bodyLevel is the level a body spells, in each format the family prints:
// Python logging, log4j, slog text and JSON, structlog, logfmt, or a plain
// line's leading word.
func bodyLevel(body string) string {
	for _, key := range []string{`"level":"`, "level=", "lvl="} {
		if i := strings.Index(body, key); i >= 0 {
			v := body[i+len(key):]
			return v[:strings.IndexAny(v+`" `, `" `)]
		}
	}
	switch {
	case pythonLine.MatchString(body):
		return strings.Split(body, " - ")[2]
	case log4jLine.MatchString(body):
		return strings.Fields(body[strings.IndexByte(body, ']')+1:])[0]
	}
	word, _, _ := strings.Cut(body, " ")
	return word
}

// errorSignals returns the explicit error signals in r's records: error
// severities, error levels in bodies, error span statuses, exception events
// and error-naming attributes.
func errorSignals(r *workload.Request) []string {
	var out []string
	for _, s := range r.Spans {
		if s.Error != "" {
			out = append(out, s.Name+" status "+s.Error)
		}
		for _, e := range s.Events {
			out = append(out, s.Name+" event "+e.Name)
		}
		for _, kv := range s.Attrs {
			if strings.Contains(string(kv.Key), "error") || kv.Key == "abort.reason" {
				out = append(out, s.Name+" attribute "+string(kv.Key))
			}
		}
	}
	for _, l := range allLogs(r) {
		if l.Severity >= log.SeverityError || strings.EqualFold(bodyLevel(l.Body), "error") {
			out = append(out, l.Service.Instance+" log "+l.Body)
		}
	}
	return out
}

// bodyKeys returns the keys of a log body: a JSON object's members, or the
// key=value pairs of any other line.
func keysOf(t *testing.T, body string) []string {
	if strings.HasPrefix(body, "{") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			t.Fatalf("invalid JSON body %s: %v", body, err)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	}
	var keys []string
	for _, m := range pairKey.FindAllStringSubmatch(body, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

var pairKey = regexp.MustCompile(`(?:^|\s)([A-Za-z_][\w.\-]*)=`)

func durationMs(s workload.Span) float64 {
	return float64(s.End.Sub(s.Start)) / float64(time.Millisecond)
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func durations(spans []workload.Span) []float64 {
	out := make([]float64, len(spans))
	for i, s := range spans {
		out[i] = durationMs(s)
	}
	return out
}
