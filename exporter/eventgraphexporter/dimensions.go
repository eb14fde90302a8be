package eventgraphexporter

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/eventgraph"
	"github.com/loom-otel/loom/internal/failure"
	"github.com/loom-otel/loom/internal/golden"
)

// Bounds of the dimension discovery. A name showing more than
// maxDimensionValues values is an id or a count, not a dimension; at most
// maxDimensionNames names are watched, so hostile traffic with ever new
// names costs a bounded amount of memory.
const (
	maxDimensionValues = 32
	maxDimensionNames  = 512
	maxDimensionBytes  = 96
)

// dimensionTracker discovers dimensions from the data: the record and
// resource attributes whose values stay few. Nobody configures them, so an
// attribute nobody thought of (a prompt template, a LoRA adapter, a region)
// can still be a root cause the rca extension ranks.
type dimensionTracker struct {
	mu    sync.RWMutex
	names map[string]*dimensionValues
}

type dimensionValues struct {
	values map[string]struct{}
	// many: the name showed more than maxDimensionValues values.
	many bool
}

func newDimensionTracker() *dimensionTracker {
	return &dimensionTracker{names: map[string]*dimensionValues{}}
}

// isDimension reports whether name=value is a dimension value, learning it.
func (t *dimensionTracker) isDimension(name, value string) bool {
	t.mu.RLock()
	d := t.names[name]
	if d != nil {
		_, known := d.values[value]
		many := d.many
		t.mu.RUnlock()
		if known || many {
			return known && !many
		}
	} else {
		t.mu.RUnlock()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d = t.names[name]
	if d == nil {
		if len(t.names) >= maxDimensionNames {
			return false
		}
		d = &dimensionValues{values: map[string]struct{}{}}
		t.names[name] = d
	}
	if d.many {
		return false
	}
	if _, known := d.values[value]; !known {
		if len(d.values) >= maxDimensionValues {
			d.many, d.values = true, nil
			return false
		}
		d.values[value] = struct{}{}
	}
	return true
}

// dims lists the record's dimension values ("name=value", record attributes
// before the resource's of the same name), at most eventgraph.MaxDims.
func (t *dimensionTracker) dims(attrs, resource pcommon.Map) []string {
	var out []string
	add := func(m pcommon.Map, isResource bool) {
		for k, v := range m.All() {
			if len(out) >= eventgraph.MaxDims {
				return
			}
			if isResource {
				if _, shadowed := attrs.Get(k); shadowed {
					continue
				}
			}
			if !candidateDimension(k) {
				continue
			}
			s, ok := dimensionValue(v)
			if ok && t.isDimension(k, s) {
				out = append(out, k+"="+s)
			}
		}
	}
	add(attrs, false)
	add(resource, true)
	return out
}

// candidateDimension leaves out what is not a dimension by its name: the
// fields the event holds anyway, Loom's own annotations, measurements, and
// attributes that report an error (a symptom, never a cause).
func candidateDimension(k string) bool {
	if k == "" || len(k) > maxDimensionBytes || strings.ContainsRune(k, '=') || modeled[k] ||
		k == string(semconv.ServiceNameKey) || k == string(semconv.HostNameKey) {
		return false
	}
	if golden.IsLoomAttr(k) || golden.IsResourceUsage(k) || golden.IsOutcomeAttr(k) || golden.IsPerRecord(k) {
		return false
	}
	for _, e := range failure.DefaultErrorAttributes {
		if k == e {
			return false
		}
	}
	return true
}

// dimensionValue is the text of a value that can be a dimension's: short
// text, an integer or a bool; never a float (a measurement) or a list.
func dimensionValue(v pcommon.Value) (string, bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		s := v.Str()
		return s, s != "" && len(s) <= maxDimensionBytes && utf8.ValidString(s)
	case pcommon.ValueTypeInt:
		return strconv.FormatInt(v.Int(), 10), true
	case pcommon.ValueTypeBool:
		return strconv.FormatBool(v.Bool()), true
	}
	return "", false
}
