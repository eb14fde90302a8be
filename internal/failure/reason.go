// Package failure is Loom's one failure model (ARCHITECTURE.md §5a): whether a
// request failed, and why, decided from its records by detectors that work on
// classes of evidence, never on a workload's field names.
//
// Record-level detectors judge one record alone: explicit errors (span status,
// exception events, log severity from its number, its text or its body, error
// attributes), GPU driver failures, configured OTTL conditions. Learned
// detectors judge a record against what the same place usually shows: a stage
// that is abnormally slow for its (service, stage, model), an outcome
// attribute whose value is rare in the baseline and surging now (value drift,
// a field that stops being written included). Every finding is a Reason; a
// request with at least one failed, and its reasons travel with its records
// (VerdictAttr, ReasonsAttr) so that the event graph and the rca extension
// read the same verdict that sampling kept the request by.
package failure // import "github.com/loom-otel/loom/internal/failure"

import (
	"iter"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/golden"
)

// Kind is a class of evidence.
type Kind uint8

const (
	// KindStatus: a span ended with status error.
	KindStatus Kind = iota + 1
	// KindException: a span recorded an exception event.
	KindException
	// KindSeverity: a log record's severity (number or text) is at or above the error level.
	KindSeverity
	// KindText: the error exists only in a log body's text (a level word, a
	// JSON or logfmt level field, a stack trace).
	KindText
	// KindAttribute: a configured error attribute (error.type, ...) says something failed.
	KindAttribute
	// KindGPU: a GPU driver failure or XID from the gpu receiver, tied to the request.
	KindGPU
	// KindCondition: a configured OTTL failure condition held on a record.
	KindCondition
	// KindLatency: a stage took abnormally long for its (service, stage, model).
	KindLatency
	// KindValueDrift: an outcome attribute took a value that is rare in its
	// baseline and surging now, or stopped being written.
	KindValueDrift
	// KindSchemaDrift: the record's model_ver stopped writing fields its
	// predecessor's records nearly always carried (goldenfield's schema drift).
	KindSchemaDrift
	numKinds
)

var kindNames = [numKinds]string{"", "error_status", "exception", "error_severity", "error_text", "error_attribute", "gpu",
	"condition", "latency", "value_drift", "schema_drift"}

func (k Kind) String() string {
	if k < numKinds && k > 0 {
		return kindNames[k]
	}
	return "unknown"
}

// Absent is the value of a value-drift reason about an attribute that stopped being written.
const Absent = "(absent)"

// Reason is one piece of evidence that a request failed.
type Reason struct {
	Kind Kind
	// Detector names what found it: the sampling policy's name.
	Detector string
	// Service and Stage say where: the record's service.name and stage.
	Service, Stage string
	// Attribute and Value say what: the error attribute, the drifting
	// attribute and its value (or bucket), "duration_ms" for latency.
	Attribute, Value string
	// Baseline and Current quantify it: for value drift the value's share of
	// the baseline and of the recent records; for latency the stage's usual
	// bound and the observed duration, in milliseconds.
	Baseline, Current float64
}

// String is a one-line explanation, e.g.
// "value_drift: judge.grade=poor at guard (aegis-guard): 0.0% of the baseline, 4.1% now".
func (r Reason) String() string {
	var b strings.Builder
	b.WriteString(r.Kind.String())
	b.WriteString(": ")
	if r.Attribute != "" {
		b.WriteString(r.Attribute)
		if r.Value != "" && r.Kind != KindSchemaDrift {
			b.WriteByte('=')
			b.WriteString(r.Value)
		}
		b.WriteByte(' ')
	}
	switch {
	case r.Stage != "":
		b.WriteString("at ")
		b.WriteString(r.Stage)
		if r.Service != "" {
			b.WriteString(" (" + r.Service + ")")
		}
	case r.Service != "":
		b.WriteString("in " + r.Service)
	}
	line := strings.TrimSpace(b.String())
	switch r.Kind {
	case KindValueDrift:
		line += ": " + percent(r.Baseline) + " of the baseline, " + percent(r.Current) + " now"
	case KindLatency:
		line += ": " + strconv.FormatFloat(r.Current, 'f', 1, 64) + " ms, usually under " +
			strconv.FormatFloat(r.Baseline, 'f', 1, 64) + " ms"
	case KindSchemaDrift:
		line += ": missing since model_ver " + r.Value
	}
	return line
}

// ReasonGroup is a reason's text (Reason.String) without the quantities of
// one request (a duration, a share), so that requests failing the same way
// count together.
func ReasonGroup(text string) string {
	for _, kind := range []Kind{KindLatency, KindValueDrift} {
		if strings.HasPrefix(text, kind.String()+": ") {
			if i := strings.LastIndex(text, "): "); i > 0 {
				return text[:i+1]
			}
		}
	}
	return text
}

func percent(share float64) string { return strconv.FormatFloat(100*share, 'f', 1, 64) + "%" }

// Record attributes that carry a request's verdict on each of its kept records.
const (
	// VerdictAttr is a bool: the request failed.
	VerdictAttr = golden.RequestFailed
	// ReasonsAttr lists why, one map per reason (MaxReasons at most) with the
	// keys below.
	ReasonsAttr = golden.RequestFailureReasons
)

// Keys of a reason's map in ReasonsAttr.
const (
	reasonKind      = "kind"
	reasonDetector  = "detector"
	reasonService   = "service.name"
	reasonStage     = "stage"
	reasonAttribute = "attribute"
	reasonValue     = "value"
	reasonBaseline  = "baseline"
	reasonCurrent   = "current"
	reasonText      = "text"
)

// MaxReasons bounds the reasons a request keeps: the first of each kind come first.
const MaxReasons = 8

// Verdict is whether a request failed, and why.
type Verdict struct {
	Failed  bool
	Reasons []Reason
}

// Add records r, keeping at most MaxReasons and at most one per kind,
// detector, attribute and value.
func (v *Verdict) Add(r Reason) {
	v.Failed = true
	if len(v.Reasons) >= MaxReasons {
		return
	}
	for _, o := range v.Reasons {
		if o.Kind == r.Kind && o.Detector == r.Detector && o.Attribute == r.Attribute && o.Value == r.Value && o.Stage == r.Stage {
			return
		}
	}
	v.Reasons = append(v.Reasons, r)
}

// Merge adds o's reasons to v.
func (v *Verdict) Merge(o *Verdict) {
	for _, r := range o.Reasons {
		v.Add(r)
	}
	v.Failed = v.Failed || o.Failed
}

// Annotate writes the verdict onto a record's attributes, replacing whatever
// a client sent under the same names.
func (v *Verdict) Annotate(attrs pcommon.Map) {
	attrs.PutBool(VerdictAttr, v.Failed)
	if !v.Failed {
		attrs.Remove(ReasonsAttr)
		return
	}
	s := attrs.PutEmptySlice(ReasonsAttr)
	s.EnsureCapacity(len(v.Reasons))
	for _, r := range v.Reasons {
		m := s.AppendEmpty().SetEmptyMap()
		m.EnsureCapacity(maxReasonFields) // put one by one, its fields would grow the map four times
		m.PutStr(reasonKind, r.Kind.String())
		putNonEmpty(m, reasonDetector, r.Detector)
		putNonEmpty(m, reasonService, r.Service)
		putNonEmpty(m, reasonStage, r.Stage)
		putNonEmpty(m, reasonAttribute, r.Attribute)
		putNonEmpty(m, reasonValue, r.Value)
		if r.Kind == KindValueDrift || r.Kind == KindLatency {
			m.PutDouble(reasonBaseline, r.Baseline)
			m.PutDouble(reasonCurrent, r.Current)
		}
		m.PutStr(reasonText, r.String())
	}
}

// maxReasonFields is the most fields a reason's map holds: kind, detector,
// service, stage, attribute, value, baseline, current and text.
const maxReasonFields = 9

func putNonEmpty(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}

// FromAttributes reads the verdict a reqsampling processor wrote on a record;
// ok is false when the record carries none.
func FromAttributes(attrs pcommon.Map) (v Verdict, ok bool) {
	failed, ok := attrs.Get(VerdictAttr)
	if !ok || failed.Type() != pcommon.ValueTypeBool {
		return Verdict{}, false
	}
	v.Failed = failed.Bool()
	reasons, found := attrs.Get(ReasonsAttr)
	if !found || reasons.Type() != pcommon.ValueTypeSlice {
		return v, true
	}
	for i := 0; i < reasons.Slice().Len() && len(v.Reasons) < MaxReasons; i++ {
		e := reasons.Slice().At(i)
		if e.Type() != pcommon.ValueTypeMap {
			continue
		}
		m := e.Map()
		r := Reason{Kind: parseKind(str(m, reasonKind)), Detector: str(m, reasonDetector), Service: str(m, reasonService),
			Stage: str(m, reasonStage), Attribute: str(m, reasonAttribute), Value: str(m, reasonValue)}
		if b, ok := m.Get(reasonBaseline); ok && b.Type() == pcommon.ValueTypeDouble {
			r.Baseline = b.Double()
		}
		if c, ok := m.Get(reasonCurrent); ok && c.Type() == pcommon.ValueTypeDouble {
			r.Current = c.Double()
		}
		v.Reasons = append(v.Reasons, r)
	}
	return v, true
}

// NamesPlace says whether the verdict on a record says its request failed
// and names the record's place (service and stage) as the evidence. It reads
// the attributes in place, for writers that ask it of every record.
func NamesPlace(attrs pcommon.Map, service, stage string) bool {
	for m := range failedReasons(attrs) {
		if str(m, reasonService) == service && str(m, reasonStage) == stage {
			return true
		}
	}
	return false
}

// ReasonTexts returns the one-line explanations the verdict on a record
// carries, as Annotate wrote them (Reason.String); nil unless its request failed.
func ReasonTexts(attrs pcommon.Map) []string {
	var texts []string
	for m := range failedReasons(attrs) {
		if t := str(m, reasonText); t != "" {
			texts = append(texts, t)
		}
	}
	return texts
}

// ReasonAttributes returns the attributes the verdict on a record names as
// evidence (an error attribute, a drifting outcome, the fields a schema drift
// lost), each once, sorted; nil unless its request failed. Latency reasons
// name no attribute of the record.
func ReasonAttributes(attrs pcommon.Map) []string {
	var names []string
	for m := range failedReasons(attrs) {
		if str(m, reasonKind) == KindLatency.String() {
			continue
		}
		for name := range strings.SplitSeq(str(m, reasonAttribute), ",") {
			if name != "" && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// failedReasons yields the reason maps of a failed verdict on a record, in place.
func failedReasons(attrs pcommon.Map) iter.Seq[pcommon.Map] {
	return func(yield func(pcommon.Map) bool) {
		if failed, ok := attrs.Get(VerdictAttr); !ok || failed.Type() != pcommon.ValueTypeBool || !failed.Bool() {
			return
		}
		reasons, ok := attrs.Get(ReasonsAttr)
		if !ok || reasons.Type() != pcommon.ValueTypeSlice {
			return
		}
		for _, e := range reasons.Slice().All() {
			if e.Type() == pcommon.ValueTypeMap && !yield(e.Map()) {
				return
			}
		}
	}
}

func str(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

func parseKind(s string) Kind {
	for k := Kind(1); k < numKinds; k++ {
		if kindNames[k] == s {
			return k
		}
	}
	return 0
}
