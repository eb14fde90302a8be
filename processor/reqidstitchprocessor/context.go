package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/golden"
)

// What some records of a request say about all of them is known: the input
// it was asked and the model that served it. A field its records disagree on
// (a request served by a text and a judge model) is ambiguous and never filled;
// a model_ver that is only the family of the other (the model asked for,
// llama3-8b, beside the version that answered, llama3-8b-v2.2.0) is no
// disagreement: the version is the request's model.
const (
	knownInput uint8 = 1 << iota
	knownModel
)

// maxInterned bounds the model_ver values a shard shares between its requests.
const maxInterned = 1024

// maxKnownBytes bounds a carried value (an input_hash is 8 hex digits): a
// longer one is taken as a disagreement, and never filled. The request keeps
// the length of its input_hash in a byte.
const maxKnownBytes = 255

// carry learns what attrs says about its request r and fills what attrs
// lacks from what r's earlier records said, listing the filled fields in
// golden.derived: a plain-text line of a request then carries the input and
// the model its structured records name. Called by r's shard's (sh) owner.
func carry(sh *shard, r *request, attrs pcommon.Map, t *tally) {
	models := &sh.models
	input, model := r.inputHash(), r.modelVer(models)
	learnedInput, learnedModel := input, model
	if v, ok := stringAttr(attrs, golden.InputHash); ok {
		learnedInput = r.learn(knownInput, input, v)
	} else if input != "" && r.flags&knownInput == 0 {
		derive(attrs, golden.InputHash, input)
		t.filled[filledInputHash]++
	}
	if v, ok := stringAttr(attrs, golden.ModelVer); ok {
		learnedModel = r.learnModel(model, v)
	} else if model != "" && r.flags&knownModel == 0 {
		derive(attrs, golden.ModelVer, model)
		t.filled[filledModelVer]++
	}
	if learnedInput != input || learnedModel != model {
		r.setKnown(models, learnedInput, learnedModel)
	}
}

// learnModel is learn for model_ver, where a family gives way to its version.
func (r *request) learnModel(known, v string) string {
	switch {
	case r.flags&knownModel != 0: // for good: no record needs its family looked up
	case known == v || known != "" && golden.ModelFamily(known) == v:
	case known != "" && golden.ModelFamily(v) == known && len(v) <= maxKnownBytes:
		return v
	default:
		return r.learn(knownModel, known, v)
	}
	return known
}

// learn returns what r knows of the field flag after a record says v: v
// when it knew nothing, else what it knew, flagged ambiguous when v differs.
func (r *request) learn(flag uint8, known, v string) string {
	switch {
	case r.flags&flag != 0:
	case len(v) > maxKnownBytes:
		r.flags |= flag
	case known == "":
		return v
	case known != v:
		r.flags |= flag
	}
	return known
}

func (r *request) inputHash() string { return r.text[r.idLen():][:r.hashLen] }

func (r *request) modelVer(models *modelTable) string {
	if r.model != 0 {
		return models.name(r.model)
	}
	return r.text[r.idLen()+int(r.hashLen):]
}

// setKnown replaces what r knows. The concatenation is a new string: never a
// view of the batch the values came from.
func (r *request) setKnown(models *modelTable, inputHash, modelVer string) {
	r.model = 0
	if modelVer != "" {
		r.model = models.id(modelVer)
	}
	if r.model != 0 {
		modelVer = ""
	}
	r.text = r.id() + inputHash + modelVer
	r.hashLen = uint8(len(inputHash))
}

// modelID is a model_ver in a modelTable; 0 is none.
type modelID uint16

// modelTable interns model_ver values, few and shared by many requests: a
// request keeps 2 bytes instead of a 16-byte string header.
type modelTable struct {
	names []string // by modelID-1
	ids   map[string]modelID
}

func newModelTable() modelTable { return modelTable{ids: map[string]modelID{}} }

// id returns the id of v, adding it; 0 once the table holds maxInterned values.
func (m *modelTable) id(v string) modelID {
	if id, ok := m.ids[v]; ok {
		return id
	}
	if len(m.names) >= maxInterned {
		return 0
	}
	v = strings.Clone(v)
	m.names = append(m.names, v)
	m.ids[v] = modelID(len(m.names))
	return modelID(len(m.names))
}

func (m *modelTable) name(id modelID) string { return m.names[id-1] }

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
	list := attrs.PutEmptySlice(golden.DerivedAttr)
	// Room for every field carry derives: a second one is not copied into a new array.
	list.EnsureCapacity(derivableFields)
	list.AppendEmpty().SetStr(field)
}

// derivableFields are the fields carry derives: input_hash and model_ver.
const derivableFields = 2
