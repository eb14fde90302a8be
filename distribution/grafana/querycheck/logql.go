package querycheck

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
)

// LogQL is what a valid LogQL query names.
type LogQL struct {
	// Metric is true for a metric query (a range or vector aggregation),
	// false for a log query.
	Metric bool
	// StreamLabels are the label names of the stream selectors.
	StreamLabels []string
	// FilterLabels are the names label filter expressions compare: stream
	// labels, structured metadata, or labels a parser stage extracted.
	FilterLabels []string
	// Parsers are the parser stages used (json, logfmt, regexp, pattern, unpack).
	Parsers []string
	// Grouping are the labels of by/without clauses.
	Grouping []string
}

var logqlLang = language{
	name:      "LogQL",
	identPart: isLabelRune,
	ops: []string{
		"|=", "|~", "|>", "!=", "!~", "!>", "=~", "==", ">=", "<=", "--",
		"{", "}", "(", ")", "[", "]", ",", "|", "=", ">", "<", "+", "-", "*", "/", "%", "^", "@",
	},
}

// Range aggregations, and whether each needs an unwrapped label (true),
// refuses one (false), or takes either (absent from both sets).
var (
	logRangeAggs = map[string]bool{
		"count_over_time": false, "bytes_rate": false, "bytes_over_time": false, "absent_over_time": false,
		"sum_over_time": true, "avg_over_time": true, "max_over_time": true, "min_over_time": true,
		"first_over_time": true, "last_over_time": true, "stdvar_over_time": true, "stddev_over_time": true,
		"quantile_over_time": true, "rate_counter": true,
	}
	logVectorAggs = map[string]bool{
		"sum": false, "avg": false, "min": false, "max": false, "stddev": false, "stdvar": false, "count": false,
		"topk": true, "bottomk": true, "sort": false, "sort_desc": false,
	}
	logBinaryOps   = []string{"or", "and", "unless", "==", "!=", ">=", "<=", ">", "<", "+", "-", "*", "/", "%", "^"}
	labelMatchOps  = []string{"=", "!=", "=~", "!~"}
	labelFilterOps = []string{"=", "!=", "=~", "!~", "==", ">", ">=", "<", "<="}
	lineFilterOps  = []string{"|=", "!=", "|~", "!~", "|>", "!>"}
)

type logqlParser struct {
	parser
	out LogQL
	// unwraps counts unwrap stages, for the range aggregation around them.
	unwraps int
}

// ParseLogQL checks q against the LogQL grammar (Loki 3 documentation: log
// queries with stream selectors, line filters, parsers, label filters,
// formatting and unwrap stages; metric queries with range and vector
// aggregations and binary operators) and returns what it names.
func ParseLogQL(q string) (*LogQL, error) {
	tokens, err := scan(logqlLang, q)
	if err != nil {
		return nil, err
	}
	p := &logqlParser{parser: parser{lang: logqlLang, tokens: tokens}}
	kind, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != tokEOF {
		return nil, p.errorf("unexpected %s after the query", p.peek())
	}
	if kind == logRangeKind {
		return nil, fmt.Errorf("LogQL: a log range ([duration]) needs a range aggregation around it, e.g. count_over_time(...)")
	}
	p.out.Metric = kind == metricKind
	for _, names := range []*[]string{&p.out.StreamLabels, &p.out.FilterLabels, &p.out.Parsers, &p.out.Grouping} {
		sort.Strings(*names)
		*names = slices.Compact(*names)
	}
	return &p.out, nil
}

type exprKind int

const (
	logKind exprKind = iota
	logRangeKind
	metricKind
)

// expr parses binary operations between metric queries, or a single log query.
func (p *logqlParser) expr() (exprKind, error) {
	left, err := p.unary()
	if err != nil {
		return 0, err
	}
	for p.isBinaryOp() {
		op := p.next().text
		p.accept("bool")
		if err := p.vectorMatching(); err != nil {
			return 0, err
		}
		right, err := p.unary()
		if err != nil {
			return 0, err
		}
		if left != metricKind || right != metricKind {
			return 0, p.errorf("%q joins metric queries only; wrap log queries in an aggregation", op)
		}
	}
	return left, nil
}

func (p *logqlParser) isBinaryOp() bool {
	t := p.peek()
	return (t.kind == tokOp || t.kind == tokIdent) && slices.Contains(logBinaryOps, t.text)
}

// vectorMatching parses on(...)/ignoring(...) and group_left/right(...).
func (p *logqlParser) vectorMatching() error {
	for _, keyword := range []string{"on", "ignoring", "group_left", "group_right"} {
		if p.accept(keyword) {
			if _, err := p.labelList(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *logqlParser) unary() (exprKind, error) {
	if p.accept("-") || p.accept("+") {
		kind, err := p.primary()
		if err == nil && kind != metricKind {
			err = p.errorf("a sign applies to a metric query")
		}
		return kind, err
	}
	return p.primary()
}

func (p *logqlParser) primary() (exprKind, error) {
	t := p.peek()
	switch {
	case t.kind == tokNumber:
		p.next()
		return metricKind, nil
	case p.is("{"):
		if err := p.logQuery(); err != nil {
			return 0, err
		}
		return p.maybeRange(logKind)
	case p.is("("):
		p.next()
		kind, err := p.expr()
		if err != nil {
			return 0, err
		}
		if err := p.expect(")"); err != nil {
			return 0, err
		}
		return p.maybeRange(kind)
	case t.kind == tokIdent:
		if _, ok := logRangeAggs[t.text]; ok || t.text == "rate" {
			return p.rangeAggregation()
		}
		if _, ok := logVectorAggs[t.text]; ok {
			return p.vectorAggregation()
		}
		switch t.text {
		case "vector":
			p.next()
			if err := p.expect("("); err != nil {
				return 0, err
			}
			if _, err := p.expectKind(tokNumber, "a number"); err != nil {
				return 0, err
			}
			return metricKind, p.expect(")")
		case "label_replace":
			return p.labelReplace()
		}
		return 0, p.errorf("unknown function or keyword %s", t)
	}
	return 0, p.errorf("expected a stream selector {…}, an aggregation or a number, found %s", t)
}

// maybeRange turns a log query followed by [duration] into a log range.
func (p *logqlParser) maybeRange(kind exprKind) (exprKind, error) {
	if !p.is("[") {
		return kind, nil
	}
	if kind != logKind {
		return 0, p.errorf("a range [duration] follows a log query only")
	}
	p.next()
	if _, err := p.duration(); err != nil {
		return 0, err
	}
	if err := p.expect("]"); err != nil {
		return 0, err
	}
	if p.accept("offset") {
		if _, err := p.duration(); err != nil {
			return 0, err
		}
	}
	return logRangeKind, nil
}

func (p *logqlParser) duration() (token, error) {
	t := p.peek()
	if t.kind != tokUnit || !isDuration(t.text) {
		return token{}, p.errorf("expected a duration such as 5m, found %s", t)
	}
	return p.next(), nil
}

func (p *logqlParser) rangeAggregation() (exprKind, error) {
	name := p.next().text
	if err := p.expect("("); err != nil {
		return 0, err
	}
	if name == "quantile_over_time" {
		if _, err := p.expectKind(tokNumber, "the quantile (a number)"); err != nil {
			return 0, err
		}
		if err := p.expect(","); err != nil {
			return 0, err
		}
	}
	unwrapsBefore := p.unwraps
	kind, err := p.expr()
	if err != nil {
		return 0, err
	}
	if kind != logRangeKind {
		return 0, p.errorf("%s takes a log range, e.g. {app=\"x\"}[5m]", name)
	}
	unwrapped := p.unwraps > unwrapsBefore
	if needs, fixed := logRangeAggs[name]; fixed && needs != unwrapped {
		if needs {
			return 0, p.errorf("%s needs an unwrap stage (| unwrap <label>)", name)
		}
		return 0, p.errorf("%s counts log lines and takes no unwrap stage", name)
	}
	if err := p.expect(")"); err != nil {
		return 0, err
	}
	if unwrapped {
		if err := p.grouping(); err != nil {
			return 0, err
		}
	}
	return metricKind, nil
}

func (p *logqlParser) vectorAggregation() (exprKind, error) {
	name := p.next().text
	if err := p.grouping(); err != nil {
		return 0, err
	}
	if err := p.expect("("); err != nil {
		return 0, err
	}
	if logVectorAggs[name] {
		if _, err := p.expectKind(tokNumber, "the count (a number)"); err != nil {
			return 0, err
		}
		if err := p.expect(","); err != nil {
			return 0, err
		}
	}
	kind, err := p.expr()
	if err != nil {
		return 0, err
	}
	if kind != metricKind {
		return 0, p.errorf("%s aggregates a metric query, e.g. %s(count_over_time({app=\"x\"}[5m]))", name, name)
	}
	if err := p.expect(")"); err != nil {
		return 0, err
	}
	return metricKind, p.grouping()
}

func (p *logqlParser) labelReplace() (exprKind, error) {
	p.next()
	if err := p.expect("("); err != nil {
		return 0, err
	}
	kind, err := p.expr()
	if err != nil {
		return 0, err
	}
	if kind != metricKind {
		return 0, p.errorf("label_replace takes a metric query")
	}
	for i := 0; i < 4; i++ {
		if err := p.expect(","); err != nil {
			return 0, err
		}
		if _, err := p.expectKind(tokString, "a string"); err != nil {
			return 0, err
		}
	}
	return metricKind, p.expect(")")
}

func (p *logqlParser) grouping() error {
	if p.accept("by") || p.accept("without") {
		labels, err := p.labelList()
		p.out.Grouping = append(p.out.Grouping, labels...)
		return err
	}
	return nil
}

func (p *logqlParser) labelList() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var labels []string
	for !p.is(")") {
		label, err := p.expectKind(tokIdent, "a label name")
		if err != nil {
			return nil, err
		}
		labels = append(labels, label.text)
		if !p.accept(",") {
			break
		}
	}
	return labels, p.expect(")")
}

// logQuery parses a stream selector and its pipeline.
func (p *logqlParser) logQuery() error {
	if err := p.streamSelector(); err != nil {
		return err
	}
	for {
		switch {
		case p.isLineFilter():
			if err := p.lineFilter(); err != nil {
				return err
			}
		case p.is("|"):
			p.next()
			if err := p.stage(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (p *logqlParser) streamSelector() error {
	if err := p.expect("{"); err != nil {
		return err
	}
	selective := false
	for {
		name, err := p.expectKind(tokIdent, "a label name")
		if err != nil {
			return err
		}
		op := p.peek()
		if op.kind != tokOp || !slices.Contains(labelMatchOps, op.text) {
			return p.errorf("expected one of = != =~ !~ after label %s, found %s", name.text, op)
		}
		p.next()
		value, err := p.expectKind(tokString, "a quoted label value")
		if err != nil {
			return err
		}
		matchesEmpty := value.value == ""
		if op.text == "=~" || op.text == "!~" {
			re, err := regexp.Compile("^(?:" + value.value + ")$")
			if err != nil {
				return p.errorf("label %s: bad regular expression %s: %v", name.text, value.text, err)
			}
			matchesEmpty = re.MatchString("")
		}
		if (op.text == "=" || op.text == "=~") && !matchesEmpty {
			selective = true
		}
		p.out.StreamLabels = append(p.out.StreamLabels, name.text)
		if !p.accept(",") {
			break
		}
	}
	if err := p.expect("}"); err != nil {
		return err
	}
	if !selective {
		return p.errorf("a stream selector needs at least one matcher that does not match the empty value, e.g. {service_name=~\".+\"}")
	}
	return nil
}

func (p *logqlParser) isLineFilter() bool {
	t := p.peek()
	return t.kind == tokOp && slices.Contains(lineFilterOps, t.text)
}

// lineFilter parses |= "x" (or "y")*, |~ "regex", and ip("…") arguments.
func (p *logqlParser) lineFilter() error {
	op := p.next().text
	for {
		if p.accept("ip") {
			if err := p.expect("("); err != nil {
				return err
			}
			if _, err := p.expectKind(tokString, "an IP or CIDR string"); err != nil {
				return err
			}
			if err := p.expect(")"); err != nil {
				return err
			}
		} else {
			value, err := p.expectKind(tokString, "a quoted filter")
			if err != nil {
				return err
			}
			if op == "|~" || op == "!~" {
				if _, err := regexp.Compile(value.value); err != nil {
					return p.errorf("bad regular expression %s: %v", value.text, err)
				}
			}
		}
		if !p.accept("or") {
			return nil
		}
	}
}

func (p *logqlParser) stage() error {
	t := p.peek()
	if t.kind != tokIdent && !p.is("(") {
		return p.errorf("expected a pipeline stage after |, found %s", t)
	}
	switch t.text {
	case "json", "logfmt":
		p.next()
		p.out.Parsers = append(p.out.Parsers, t.text)
		for t.text == "logfmt" && p.accept("--") {
			flag, err := p.expectKind(tokIdent, "a logfmt flag")
			if err != nil {
				return err
			}
			if flag.text != "strict" && flag.text != "keep" {
				return p.errorf("logfmt has no flag --%s (--strict, --keep-empty)", flag.text)
			}
			if flag.text == "keep" && (!p.accept("-") || !p.accept("empty")) {
				return p.errorf("logfmt has no flag --keep (--keep-empty)")
			}
		}
		return p.extractionParams()
	case "regexp", "pattern":
		p.next()
		p.out.Parsers = append(p.out.Parsers, t.text)
		value, err := p.expectKind(tokString, "a quoted "+t.text)
		if err != nil {
			return err
		}
		if t.text == "regexp" {
			re, err := regexp.Compile(value.value)
			if err != nil {
				return p.errorf("bad regular expression %s: %v", value.text, err)
			}
			if !slices.ContainsFunc(re.SubexpNames(), func(name string) bool { return name != "" }) {
				return p.errorf("regexp %s needs a named capture group (?P<name>…)", value.text)
			}
		}
		return nil
	case "unpack", "decolorize":
		p.next()
		if t.text == "unpack" {
			p.out.Parsers = append(p.out.Parsers, t.text)
		}
		return nil
	case "line_format":
		p.next()
		_, err := p.expectKind(tokString, "a quoted template")
		return err
	case "label_format":
		p.next()
		for {
			if _, err := p.expectKind(tokIdent, "a label name"); err != nil {
				return err
			}
			if err := p.expect("="); err != nil {
				return err
			}
			if t := p.peek(); t.kind != tokString && t.kind != tokIdent {
				return p.errorf("label_format takes a label or a quoted template, found %s", t)
			}
			p.next()
			if !p.accept(",") {
				return nil
			}
		}
	case "drop", "keep":
		p.next()
		for {
			if _, err := p.expectKind(tokIdent, "a label name"); err != nil {
				return err
			}
			if op := p.peek(); op.kind == tokOp && slices.Contains(labelMatchOps, op.text) {
				p.next()
				if _, err := p.expectKind(tokString, "a quoted value"); err != nil {
					return err
				}
			}
			if !p.accept(",") {
				return nil
			}
		}
	case "unwrap":
		p.next()
		p.unwraps++
		label, err := p.expectKind(tokIdent, "the label to unwrap")
		if err != nil {
			return err
		}
		if p.accept("(") {
			if !slices.Contains([]string{"bytes", "duration", "duration_seconds"}, label.text) {
				return p.errorf("unwrap has no conversion %s (bytes, duration, duration_seconds)", label.text)
			}
			if _, err := p.expectKind(tokIdent, "the label to unwrap"); err != nil {
				return err
			}
			return p.expect(")")
		}
		return nil
	}
	return p.labelFilterExpr()
}

// extractionParams parses json/logfmt's optional label="expression" list.
func (p *logqlParser) extractionParams() error {
	if p.peek().kind != tokIdent || p.peekAt(1).text != "=" {
		return nil
	}
	for {
		if _, err := p.expectKind(tokIdent, "a label name"); err != nil {
			return err
		}
		if err := p.expect("="); err != nil {
			return err
		}
		if _, err := p.expectKind(tokString, "a quoted expression"); err != nil {
			return err
		}
		if !p.accept(",") {
			return nil
		}
	}
}

// labelFilterExpr parses comparisons joined by and, or and commas.
func (p *logqlParser) labelFilterExpr() error {
	for {
		if err := p.labelFilterTerm(); err != nil {
			return err
		}
		if !p.accept("and") && !p.accept("or") && !p.accept(",") {
			// Two comparisons side by side mean "and" too.
			if p.peek().kind != tokIdent || !slices.Contains(labelFilterOps, p.peekAt(1).text) {
				return nil
			}
		}
	}
}

func (p *logqlParser) labelFilterTerm() error {
	if p.accept("(") {
		if err := p.labelFilterExpr(); err != nil {
			return err
		}
		return p.expect(")")
	}
	name, err := p.expectKind(tokIdent, "a label name")
	if err != nil {
		return err
	}
	op := p.peek()
	if op.kind != tokOp || !slices.Contains(labelFilterOps, op.text) {
		return p.errorf("expected a comparison after label %s, found %s", name.text, op)
	}
	p.next()
	p.out.FilterLabels = append(p.out.FilterLabels, name.text)
	value := p.peek()
	switch {
	case value.kind == tokString:
		if op.text == "=~" || op.text == "!~" {
			if _, err := regexp.Compile(value.value); err != nil {
				return p.errorf("bad regular expression %s: %v", value.text, err)
			}
		}
	case value.kind == tokIdent && value.text == "ip" && (op.text == "=" || op.text == "!="):
		p.next()
		if err := p.expect("("); err != nil {
			return err
		}
		if _, err := p.expectKind(tokString, "an IP or CIDR string"); err != nil {
			return err
		}
		return p.expect(")")
	case value.kind == tokNumber || value.kind == tokUnit:
		if op.text == "=~" || op.text == "!~" {
			return p.errorf("%s compares with a quoted regular expression", op.text)
		}
	default:
		return p.errorf("expected a value to compare label %s with, found %s", name.text, value)
	}
	p.next()
	return nil
}
