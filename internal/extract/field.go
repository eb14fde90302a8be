// Package extract finds fields in log bodies: JSON objects (flattened), logfmt
// lines and free text. Parsers never fail on hostile input: they bound their
// work, return what they found, and leave the body itself untouched.
package extract

// Kind is the type of a value found in a body.
type Kind uint8

const (
	String Kind = iota
	Int
	Double
	Bool
	// Raw is a JSON array, or an object nested deeper than the depth limit, kept as its JSON text.
	Raw
)

// Field is one key and value found in a body.
type Field struct {
	Key    string
	Kind   Kind
	Str    string // for String and Raw
	Int    int64
	Double float64
	Bool   bool
	// Start and End are the byte offsets of the value's text in the body (quotes
	// included), so a caller can mask a sensitive value in place.
	Start, End int
}

// Limited reports which limits cut a parse short; the fields returned are still valid.
type Limited uint8

const (
	// LimitedDepth: objects nested deeper than the limit were kept whole as Raw fields.
	LimitedDepth Limited = 1 << iota
	// LimitedFields: fields beyond the limit were not returned.
	LimitedFields
)
