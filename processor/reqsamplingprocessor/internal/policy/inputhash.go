package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/loom-otel/loom/internal/golden"
)

// InputHash matches requests whose input_hash starts with a prefix in one of
// its configured ranges, e.g. 00-09 or f7.
type InputHash struct {
	requestPolicy
	ranges []HashRange
}

var _ Evaluator = (*InputHash)(nil)

// NewInputHash returns the input_hash range policy; errors name the range's index.
func NewInputHash(ranges []string) (*InputHash, error) {
	h := &InputHash{}
	var errs []error
	for i, text := range ranges {
		r, err := ParseHashRange(text)
		if err != nil {
			errs = append(errs, fmt.Errorf("::%d: %w", i, err))
			continue
		}
		h.ranges = append(h.ranges, r)
	}
	if len(ranges) == 0 {
		errs = append(errs, errors.New(": no ranges; list prefixes such as 00-09 or f7"))
	}
	return h, errors.Join(errs...)
}

func (h *InputHash) MatchRequest(req *Request, _ bool) bool {
	for _, r := range h.ranges {
		if r.Contains(req.InputHash) {
			return true
		}
	}
	return false
}

// HashRange is an inclusive range of input_hash prefixes of one length.
type HashRange struct{ lo, hi string }

// ParseHashRange parses "f7" (one prefix) or "00-09" (every prefix from 00 to
// 09): lowercase hex, as input_hash is written, both ends of the same length.
func ParseHashRange(text string) (HashRange, error) {
	lo, hi, isRange := strings.Cut(strings.TrimSpace(text), "-")
	if !isRange {
		hi = lo
	}
	lo, hi = strings.TrimSpace(lo), strings.TrimSpace(hi)
	for _, end := range []string{lo, hi} {
		if end == "" || len(end) > golden.InputHashLen || !isLowerHex(end) {
			return HashRange{}, fmt.Errorf("%q: each end must be 1 to %d lowercase hex digits, e.g. 00-09 or f7", text, golden.InputHashLen)
		}
	}
	if len(lo) != len(hi) {
		return HashRange{}, fmt.Errorf("%q: both ends must have the same length, e.g. 00-09", text)
	}
	if lo > hi {
		return HashRange{}, fmt.Errorf("%q: the first end is above the second; write %s-%s", text, hi, lo)
	}
	return HashRange{lo: lo, hi: hi}, nil
}

// Contains reports whether hash starts with a prefix in the range.
func (r HashRange) Contains(hash string) bool {
	if len(hash) < len(r.lo) {
		return false
	}
	prefix := hash[:len(r.lo)]
	return prefix >= r.lo && prefix <= r.hi
}

func (r HashRange) String() string {
	if r.lo == r.hi {
		return r.lo
	}
	return r.lo + "-" + r.hi
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
