package policy

import (
	"errors"
	"fmt"
)

// Stage matches requests with a record whose stage matches one of its glob
// patterns, e.g. cache/miss* for every cache miss.
type Stage struct {
	recordPolicy
	patterns []string
}

var _ Evaluator = (*Stage)(nil)

// NewStage returns the stage policy; errors name the pattern's index.
func NewStage(patterns []string) (*Stage, error) {
	var errs []error
	for i, p := range patterns {
		if p == "" {
			errs = append(errs, fmt.Errorf("::%d: empty pattern; write a glob such as cache/miss*", i))
		}
	}
	if len(patterns) == 0 {
		errs = append(errs, errors.New(": no patterns; list at least one glob such as cache/miss*"))
	}
	return &Stage{patterns: patterns}, errors.Join(errs...)
}

func (s *Stage) MatchRecord(r *Record) bool {
	if r.Stage == "" {
		return false
	}
	for _, p := range s.patterns {
		if MatchGlob(p, r.Stage) {
			return true
		}
	}
	return false
}

// MatchGlob reports whether s matches pattern, where * matches any run of
// bytes ('/' included) and ? exactly one byte; every other byte matches itself.
func MatchGlob(pattern, s string) bool {
	// Greedy match with one backtrack point: the last * seen. Linear in
	// practice and never worse than len(pattern)*len(s).
	p, i := 0, 0
	star, retry := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, retry = p, i
			p++
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case star >= 0:
			retry++
			p, i = star+1, retry
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
