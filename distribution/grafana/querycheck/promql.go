package querycheck

import (
	"slices"
	"sort"
)

var promqlLang = language{
	name:      "PromQL",
	identPart: func(r rune) bool { return isLabelRune(r) || r == ':' },
	ops: []string{
		"==", "!=", "=~", "!~", ">=", "<=",
		"{", "}", "(", ")", "[", "]", ",", "=", ">", "<", "+", "-", "*", "/", "%", "^", "@", ":",
	},
}

// promqlKeywords are PromQL's words that name no metric.
var promqlKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "inf", "nan", "start", "end"}

// PromQLMetrics returns the metric names a PromQL expression selects: every
// name that is not a function, an aggregation or a keyword, and every
// __name__ label matcher's value. It checks only what it must to find them
// (balanced brackets, terminated strings); Prometheus itself judges the rest.
func PromQLMetrics(q string) ([]string, error) {
	tokens, err := scan(promqlLang, q)
	if err != nil {
		return nil, err
	}
	p := &parser{lang: promqlLang, tokens: tokens}
	var names []string
	var open []string
	for p.peek().kind != tokEOF {
		t := p.next()
		switch {
		case t.kind == tokOp && (t.text == "(" || t.text == "[" || t.text == "{"):
			open = append(open, map[string]string{"(": ")", "[": "]", "{": "}"}[t.text])
			if t.text == "{" {
				// Label matchers: only __name__ names a metric.
				for !p.is("}") && p.peek().kind != tokEOF {
					label := p.next()
					if label.kind == tokIdent && label.text == "__name__" && p.accept("=") && p.peek().kind == tokString {
						names = append(names, p.next().value)
					}
				}
			}
		case t.kind == tokOp && (t.text == ")" || t.text == "]" || t.text == "}"):
			if len(open) == 0 || open[len(open)-1] != t.text {
				return nil, p.errorf("unbalanced %q", t.text)
			}
			open = open[:len(open)-1]
		case t.kind == tokIdent && slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, t.text):
			// A label list, not metrics.
			if p.accept("(") {
				for !p.is(")") && p.peek().kind != tokEOF {
					p.next()
				}
				if err := p.expect(")"); err != nil {
					return nil, err
				}
			}
		case t.kind == tokIdent && !slices.Contains(promqlKeywords, t.text) && !p.is("(") && !p.is("by") && !p.is("without"):
			// Not a function or an aggregation (sum by (…) (…)): a metric.
			names = append(names, t.text)
		}
	}
	if len(open) > 0 {
		return nil, p.errorf("%q is never closed", open[len(open)-1])
	}
	sort.Strings(names)
	return slices.Compact(names), nil
}
