package golden

import "strings"

// ModelFamily is a model_ver without its version: "llama3-8b-v2.1.4" →
// "llama3-8b", "sdxl-turbo-v1.0" → "sdxl-turbo". A name with no version is
// its own family. Versions of one family succeed each other; two families
// are two models, never a version change.
//
// A version is the shortest trailing part, after a non-empty name on one
// line, that is one of (letters in any case):
//   - a separator [-_@:], v and a number, then [-.+]-separated alphanumeric
//     parts: "-v2.1.4", "@V0.1-rc1", ":v2";
//   - a separator [-_@:], a dotted number with at least two parts, then the
//     same parts: ":2.0-rc1", "@1.3.0";
//   - a separator [-_] and a date: "-2024-08-06", "_20240806".
//
// It runs on every record that names a model, so it is one pass over the
// name instead of a regular expression.
func ModelFamily(modelVer string) string {
	if strings.IndexByte(modelVer, '\n') >= 0 {
		return modelVer
	}
	n := len(modelVer)
	// tail is where the longest suffix of version characters starts, and
	// doubled the last index of two adjacent part separators within it.
	tail, doubled := n, -1
	for tail > 0 && isVersionByte(modelVer[tail-1]) {
		tail--
		if tail+1 < n && isPartSeparator(modelVer[tail]) && isPartSeparator(modelVer[tail+1]) && doubled < 0 {
			doubled = tail
		}
	}
	// parts reports whether modelVer[j:] is a run of [-.+]-separated
	// alphanumeric parts, possibly none: j ≥ tail, so every byte is a
	// version byte, and it only needs no doubled separators and an
	// alphanumeric last byte.
	parts := func(j int) bool {
		return j == n || (isPartSeparator(modelVer[j]) && j > doubled && isAlnum(modelVer[n-1]))
	}
	for i := max(tail-1, 1); i < n; i++ {
		sep := modelVer[i]
		if (i == tail-1 && (sep == '_' || sep == '@' || sep == ':')) || sep == '-' {
			if versionAfter(modelVer, i+1, sep, parts) {
				return modelVer[:i]
			}
		}
	}
	return modelVer
}

// versionAfter reports whether s[j:] is a version after the separator sep.
func versionAfter(s string, j int, sep byte, parts func(int) bool) bool {
	if j < len(s) && (s[j] == 'v' || s[j] == 'V') {
		if k := skipDigits(s, j+1); k > j+1 && parts(k) {
			return true
		}
	}
	if k := skipDigits(s, j); k > j && k < len(s) && s[k] == '.' {
		if m := skipDigits(s, k+1); m > k+1 && parts(m) {
			return true
		}
	}
	return (sep == '-' || sep == '_') && isDate(s[j:])
}

// isDate is \d{4}-?\d{2}-?\d{2}: YYYY-MM-DD, YYYYMMDD, or either with one dash.
func isDate(s string) bool {
	digits := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] >= '0' && s[i] <= '9':
			digits++
		case s[i] == '-' && (digits == 4 || digits == 6) && s[i-1] != '-':
		default:
			return false
		}
	}
	return digits == 8
}

func skipDigits(s string, j int) int {
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	return j
}

func isAlnum(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

func isPartSeparator(b byte) bool { return b == '-' || b == '.' || b == '+' }

func isVersionByte(b byte) bool { return isAlnum(b) || isPartSeparator(b) }
