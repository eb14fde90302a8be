package querycheck

import (
	"regexp"
	"slices"
	"sort"
	"strings"
)

// TraceQL is what a valid TraceQL query names.
type TraceQL struct {
	// Attributes are the attributes compared, as written: span.req_id,
	// resource.service.name, or .req_id for any scope.
	Attributes []string
	// Intrinsics are the intrinsic fields used: duration, status, name, span:kind, …
	Intrinsics []string
}

var traceqlLang = language{
	name: "TraceQL",
	identPart: func(r rune) bool {
		return isLabelRune(r) || r == '.' || r == ':'
	},
	ops: []string{
		"&&", "||", "!=", "=~", "!~", ">=", "<=", ">>", "<<", "!>>", "!<<", "!>", "!<", "&>>", "&<<", "&>", "&<", "&~",
		"{", "}", "(", ")", "[", "]", ",", "|", "=", ">", "<", "~", "!", "+", "-", "*", "/", "%", "^", ".",
	},
}

var (
	traceqlScopes     = []string{"span", "resource", "event", "link", "instrumentation"}
	traceqlIntrinsics = []string{
		"name", "status", "statusMessage", "kind", "duration", "rootName", "rootServiceName", "traceDuration",
		"nestedSetLeft", "nestedSetRight", "nestedSetParent",
		"span:name", "span:status", "span:statusMessage", "span:kind", "span:duration", "span:id", "span:parentID",
		"trace:duration", "trace:rootName", "trace:rootService", "trace:id",
		"event:name", "event:timeSinceStart", "link:traceID", "link:spanID",
		"instrumentation:name", "instrumentation:version",
	}
	traceqlKeywords   = []string{"true", "false", "nil", "ok", "error", "unset", "unspecified", "internal", "server", "client", "producer", "consumer"}
	traceqlCompareOps = []string{"=", "!=", ">", ">=", "<", "<=", "=~", "!~"}
	traceqlArithOps   = []string{"+", "-", "*", "/", "%", "^"}
	spansetOps        = []string{"&&", "||", ">", ">>", "<", "<<", "~", "!>", "!>>", "!<", "!<<", "!~", "&>", "&>>", "&<", "&<<", "&~"}
	// Pipeline functions: aggregates compared with a value, and the
	// stages and metrics functions that stand alone.
	traceqlAggregates = []string{"count", "avg", "min", "max", "sum"}
	traceqlMetrics    = []string{"rate", "count_over_time", "min_over_time", "max_over_time", "avg_over_time", "sum_over_time", "quantile_over_time", "histogram_over_time", "compare"}
)

type traceqlParser struct {
	parser
	out TraceQL
}

// ParseTraceQL checks q against the TraceQL grammar (Tempo documentation:
// spansets of field expressions on scoped attributes and intrinsics, spanset
// operators, and pipelines with aggregates, by(), select() and metrics
// functions) and returns what it names.
func ParseTraceQL(q string) (*TraceQL, error) {
	tokens, err := scan(traceqlLang, q)
	if err != nil {
		return nil, err
	}
	p := &traceqlParser{parser: parser{lang: traceqlLang, tokens: tokens}}
	if err := p.spansetExpr(); err != nil {
		return nil, err
	}
	for p.accept("|") {
		if err := p.pipelineStage(); err != nil {
			return nil, err
		}
	}
	if p.peek().kind != tokEOF {
		return nil, p.errorf("unexpected %s after the query", p.peek())
	}
	for _, names := range []*[]string{&p.out.Attributes, &p.out.Intrinsics} {
		sort.Strings(*names)
		*names = slices.Compact(*names)
	}
	return &p.out, nil
}

func (p *traceqlParser) spansetExpr() error {
	for {
		if err := p.spansetTerm(); err != nil {
			return err
		}
		t := p.peek()
		if t.kind != tokOp || !slices.Contains(spansetOps, t.text) {
			return nil
		}
		p.next()
	}
}

func (p *traceqlParser) spansetTerm() error {
	if p.accept("(") {
		if err := p.spansetExpr(); err != nil {
			return err
		}
		return p.expect(")")
	}
	if err := p.expect("{"); err != nil {
		return err
	}
	if p.accept("}") {
		return nil
	}
	if err := p.fieldExpr(); err != nil {
		return err
	}
	return p.expect("}")
}

// fieldExpr parses comparisons joined by && and || (|| binds looser).
func (p *traceqlParser) fieldExpr() error {
	for {
		if err := p.fieldUnary(); err != nil {
			return err
		}
		if !p.accept("&&") && !p.accept("||") {
			return nil
		}
	}
}

func (p *traceqlParser) fieldUnary() error {
	if p.accept("!") {
		return p.fieldUnary()
	}
	if p.is("(") && !p.startsArithmetic() {
		p.next()
		if err := p.fieldExpr(); err != nil {
			return err
		}
		return p.expect(")")
	}
	left, err := p.operand()
	if err != nil {
		return err
	}
	op := p.peek()
	if op.kind != tokOp || !slices.Contains(traceqlCompareOps, op.text) {
		if left == "true" || left == "false" {
			return nil
		}
		return p.errorf("expected a comparison (= != > >= < <= =~ !~) after %s, found %s", left, op)
	}
	p.next()
	right := p.peek()
	if _, err := p.operand(); err != nil {
		return err
	}
	if (op.text == "=~" || op.text == "!~") && right.kind == tokString {
		if _, err := regexp.Compile(right.value); err != nil {
			return p.errorf("bad regular expression %s: %v", right.text, err)
		}
	}
	return nil
}

// startsArithmetic reports whether a "(" opens an arithmetic operand such as
// (span.a + span.b) rather than a grouped field expression; only a
// comparison after the closing parenthesis tells them apart.
func (p *traceqlParser) startsArithmetic() bool {
	depth := 0
	for i := p.at; i < len(p.tokens); i++ {
		switch p.tokens[i].text {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 {
				next := p.tokens[min(i+1, len(p.tokens)-1)]
				return next.kind == tokOp && (slices.Contains(traceqlCompareOps, next.text) || slices.Contains(traceqlArithOps, next.text))
			}
		case "&&", "||":
			if depth == 1 {
				return false
			}
		}
	}
	return false
}

// operand parses an attribute, intrinsic or static value, with arithmetic.
func (p *traceqlParser) operand() (string, error) {
	first, err := p.term()
	if err != nil {
		return "", err
	}
	for {
		t := p.peek()
		if t.kind != tokOp || !slices.Contains(traceqlArithOps, t.text) {
			return first, nil
		}
		p.next()
		if _, err := p.term(); err != nil {
			return "", err
		}
	}
}

func (p *traceqlParser) term() (string, error) {
	t := p.peek()
	switch {
	case p.is("("):
		p.next()
		if _, err := p.operand(); err != nil {
			return "", err
		}
		return "(…)", p.expect(")")
	case p.is("-"):
		p.next()
		return p.term()
	case t.kind == tokString || t.kind == tokNumber || t.kind == tokUnit && isDuration(t.text):
		p.next()
		return t.text, nil
	case p.is("."):
		p.next()
		name, err := p.attributeName()
		if err != nil {
			return "", err
		}
		p.out.Attributes = append(p.out.Attributes, "."+name)
		return "." + name, nil
	case t.kind == tokIdent:
		p.next()
		if slices.Contains(traceqlKeywords, t.text) {
			return t.text, nil
		}
		if slices.Contains(traceqlIntrinsics, t.text) {
			p.out.Intrinsics = append(p.out.Intrinsics, t.text)
			return t.text, nil
		}
		scope, name, ok := strings.Cut(t.text, ".")
		if !ok || !slices.Contains(traceqlScopes, scope) {
			return "", p.errorf("%s is neither a scoped attribute (span., resource., event., link., instrumentation., or . for any), an intrinsic nor a value", t)
		}
		if name == "" {
			// span."quoted name"
			quoted, err := p.expectKind(tokString, "an attribute name")
			if err != nil {
				return "", err
			}
			name = quoted.value
		}
		p.out.Attributes = append(p.out.Attributes, scope+"."+name)
		return scope + "." + name, nil
	}
	return "", p.errorf("expected an attribute, intrinsic or value, found %s", t)
}

func (p *traceqlParser) attributeName() (string, error) {
	t := p.peek()
	if t.kind == tokIdent || t.kind == tokString {
		p.next()
		if t.kind == tokString {
			return t.value, nil
		}
		return t.text, nil
	}
	return "", p.errorf("expected an attribute name after '.', found %s", t)
}

func (p *traceqlParser) pipelineStage() error {
	t := p.peek()
	switch {
	case p.is("{") || p.is("("):
		return p.spansetExpr()
	case t.kind != tokIdent:
		return p.errorf("expected a pipeline stage after |, found %s", t)
	case slices.Contains(traceqlAggregates, t.text):
		p.next()
		if err := p.expect("("); err != nil {
			return err
		}
		if t.text != "count" {
			if _, err := p.operand(); err != nil {
				return err
			}
		}
		if err := p.expect(")"); err != nil {
			return err
		}
		op := p.peek()
		if op.kind != tokOp || !slices.Contains(traceqlCompareOps, op.text) {
			return p.errorf("%s() is compared with a value, e.g. %s() > 2", t.text, t.text)
		}
		p.next()
		_, err := p.operand()
		return err
	case t.text == "by" || t.text == "select" || t.text == "coalesce":
		p.next()
		return p.operandList(t.text != "coalesce")
	case slices.Contains(traceqlMetrics, t.text):
		p.next()
		if err := p.expect("("); err != nil {
			return err
		}
		for !p.is(")") {
			if _, err := p.operand(); err != nil {
				return err
			}
			if !p.accept(",") {
				break
			}
		}
		if err := p.expect(")"); err != nil {
			return err
		}
		if p.accept("by") {
			return p.operandList(true)
		}
		return nil
	}
	return p.errorf("unknown pipeline stage %s", t)
}

func (p *traceqlParser) operandList(needOne bool) error {
	if err := p.expect("("); err != nil {
		return err
	}
	if needOne && p.is(")") {
		return p.errorf("expected at least one attribute")
	}
	for !p.is(")") {
		if _, err := p.operand(); err != nil {
			return err
		}
		if !p.accept(",") {
			break
		}
	}
	return p.expect(")")
}
