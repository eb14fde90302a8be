package golden

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// InputHashLen is the number of hex digits kept of the sha256 of the normalized input.
const InputHashLen = 8

// NormalizeInput is the default input normalization before hashing: leading,
// trailing and repeated whitespace is collapsed, so the same prompt sent with
// different spacing hashes the same.
func NormalizeInput(input string) string {
	return strings.Join(strings.Fields(input), " ")
}

// HashInput returns input_hash: the first 8 hex digits of sha256 over the normalized input.
func HashInput(input string) string {
	sum := sha256.Sum256([]byte(NormalizeInput(input)))
	return hex.EncodeToString(sum[:InputHashLen/2])
}
