package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/golden"
)

// known is what some records of a request say about all of them: the input
// it was asked and the model that served it. A field its records disagree on
// (a request served by a text and a judge model) is ambiguous and never filled;
// a model_ver that is only the family of the other (the model asked for,
// llama3-8b, beside the version that answered, llama3-8b-v2.2.0) is no
// disagreement: the version is the request's model.
type known struct {
	inputHash, modelVer string
	ambiguous           uint8 // of knownInput, knownModel
}

const (
	knownInput uint8 = 1 << iota
	knownModel
)

// maxInterned bounds the model_ver values the stitcher shares between requests.
const maxInterned = 1024

// carry learns what attrs says about its request r and fills what attrs
// lacks from what r's earlier records said, listing the filled fields in
// golden.derived: a plain-text line of a request then carries the input and
// the model its structured records name.
func (s *stitcher) carry(r *request, attrs pcommon.Map) {
	k := &r.known
	if v, ok := stringAttr(attrs, golden.InputHash); ok {
		k.learn(&k.inputHash, knownInput, v, strings.Clone)
	} else if k.inputHash != "" && k.ambiguous&knownInput == 0 {
		derive(attrs, golden.InputHash, k.inputHash)
		s.tally.filled[filledInputHash]++
	}
	if v, ok := stringAttr(attrs, golden.ModelVer); ok {
		k.learnModel(v, s.intern)
	} else if k.modelVer != "" && k.ambiguous&knownModel == 0 {
		derive(attrs, golden.ModelVer, k.modelVer)
		s.tally.filled[filledModelVer]++
	}
}

// learnModel is learn for model_ver, where a family gives way to its version.
func (k *known) learnModel(v string, keep func(string) string) {
	switch {
	case k.ambiguous&knownModel != 0: // for good: no record needs its family looked up
	case k.modelVer == v || k.modelVer != "" && golden.ModelFamily(k.modelVer) == v:
	case k.modelVer != "" && golden.ModelFamily(v) == k.modelVer:
		k.modelVer = keep(v)
	default:
		k.learn(&k.modelVer, knownModel, v, keep)
	}
}

func (k *known) learn(field *string, flag uint8, v string, keep func(string) string) {
	switch {
	case *field == "":
		*field = keep(v) // never a view of the batch
	case *field != v:
		k.ambiguous |= flag
	}
}

// intern returns a copy of a low-cardinality value shared by every request
// that carries it.
func (s *stitcher) intern(v string) string {
	if shared, ok := s.interned[v]; ok {
		return shared
	}
	v = strings.Clone(v)
	if len(s.interned) < maxInterned {
		s.interned[v] = v
	}
	return v
}

func stringAttr(attrs pcommon.Map, name string) (string, bool) {
	v, ok := attrs.Get(name)
	if !ok || v.Type() != pcommon.ValueTypeStr || v.Str() == "" {
		return "", false
	}
	return v.Str(), true
}

// derive sets a field the record lacked, lists it in golden.derived and
// takes it off the record's golden.missing.
func derive(attrs pcommon.Map, field, value string) {
	attrs.PutStr(field, value)
	golden.Filled(attrs, field)
	if list, ok := attrs.Get(golden.DerivedAttr); ok && list.Type() == pcommon.ValueTypeSlice {
		list.Slice().AppendEmpty().SetStr(field)
		return
	}
	attrs.PutEmptySlice(golden.DerivedAttr).AppendEmpty().SetStr(field)
}
