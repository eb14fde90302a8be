package golden

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"
)

// InputHashLen is the number of hex digits kept of the sha256 of the normalized input.
const InputHashLen = 8

// InputNormalization selects how input text is normalized before hashing.
type InputNormalization string

const (
	// NormalizeWhitespace collapses leading, trailing and repeated whitespace (the default).
	NormalizeWhitespace InputNormalization = "whitespace"
	// NormalizeLowercase collapses whitespace and lowercases letters.
	NormalizeLowercase InputNormalization = "lowercase"
	// NormalizeNone hashes the input exactly as received.
	NormalizeNone InputNormalization = "none"
)

// Valid reports whether n is one of the defined normalizations.
func (n InputNormalization) Valid() bool {
	return n == NormalizeWhitespace || n == NormalizeLowercase || n == NormalizeNone
}

// NormalizeInput is the default input normalization before hashing: leading,
// trailing and repeated whitespace is collapsed, so the same prompt sent with
// different spacing hashes the same.
func NormalizeInput(input string) string {
	return strings.Join(strings.Fields(input), " ")
}

// HashInput returns input_hash: the first 8 hex digits of sha256 over the normalized input.
func HashInput(input string) string {
	return HashInputWith(input, NormalizeWhitespace)
}

// HashInputWith returns input_hash over input normalized as n (an unknown n means the default).
func HashInputWith(input string, n InputNormalization) string {
	// Short inputs are normalized on the stack: hashing is on every record's hot path.
	var stack [512]byte
	buf := stack[:0]
	if n == NormalizeNone {
		buf = append(buf, input...)
	} else {
		buf = appendNormalized(buf, input, n == NormalizeLowercase)
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:InputHashLen/2])
}

// appendNormalized appends input with whitespace runs collapsed to one space and
// trimmed at both ends, exactly as NormalizeInput does, optionally lowercased.
func appendNormalized(buf []byte, input string, lower bool) []byte {
	start, space := len(buf), false
	for i := 0; i < len(input); {
		// ASCII, most prompts, is read a byte at a time, without decoding.
		r, size := rune(input[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(input[i:])
		}
		if isSpace(r) {
			space = true
			i += size
			continue
		}
		if space && len(buf) > start {
			buf = append(buf, ' ')
		}
		space = false
		switch {
		case r < utf8.RuneSelf:
			if lower && 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			buf = append(buf, byte(r))
		case lower:
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
		default:
			buf = append(buf, input[i:i+size]...)
		}
		i += size
	}
	return buf
}

// isSpace is unicode.IsSpace, answering ASCII without a table lookup.
func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || '\t' <= r && r <= '\r'
	}
	return unicode.IsSpace(r)
}
