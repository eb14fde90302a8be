package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loom-otel/loom/internal/golden"
)

// condition is one OTTL condition compiled for each signal whose context
// accepts it: a condition on body or severity_number applies to log records
// only, one on name or status to spans only.
type condition struct {
	logs  *ottl.Condition[*ottllog.TransformContext]
	spans *ottl.Condition[*ottlspan.TransformContext]
}

func newCondition(text string, set component.TelemetrySettings) (condition, error) {
	logs, logErr := newLogCondition(text, set)
	spans, spanErr := newSpanCondition(text, set)
	if logErr != nil && spanErr != nil {
		return condition{}, fmt.Errorf("%q is neither a log condition (%w) nor a span condition (%w)", text, logErr, spanErr)
	}
	return condition{logs: logs, spans: spans}, nil
}

func newLogCondition(text string, set component.TelemetrySettings) (*ottl.Condition[*ottllog.TransformContext], error) {
	p, err := ottllog.NewParser(ottlfuncs.StandardConverters[*ottllog.TransformContext](), set)
	if err != nil {
		return nil, err
	}
	return p.ParseCondition(text)
}

func newSpanCondition(text string, set component.TelemetrySettings) (*ottl.Condition[*ottlspan.TransformContext], error) {
	p, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set)
	if err != nil {
		return nil, err
	}
	return p.ParseCondition(text)
}

// matches evaluates an OTTL condition; an evaluation error (a type that does
// not fit, a missing value) is a non-match: conditions meet every kind of record.
func matches[K any](c *ottl.Condition[K], tc K) bool {
	ok, err := c.Eval(context.Background(), tc)
	return err == nil && ok
}

// cause is the latest record that matched a rule's from condition for one join key.
type cause struct {
	event golden.EventHash
	at    pcommon.Timestamp
}

// rule is a compiled causal rule with its bounded memory of causes.
type rule struct {
	pos      int // position in the rule list
	name     string
	from, to condition
	joinKeys []string
	window   pcommon.Timestamp
	edge     string // ":" + edge type, the suffix of every causal.parents entry
	causes   map[string]cause
	order    []string // ring of the keys in insertion order, for eviction
	head     int
}

// ruleSet evaluates the causal rules on every record that leaves the
// processor. Its own mutex guards the remembered causes, and only them: the
// conditions are evaluated outside it, and outside every shard's.
type ruleSet struct {
	rules  []*rule
	mu     sync.Mutex
	counts tally // rule hits and rule key evictions, guarded by mu
}

func newRuleSet(cfgs []RuleConfig, maxKeys int, set component.TelemetrySettings) (*ruleSet, error) {
	rs := &ruleSet{}
	rs.counts.ruleHits = make([]int64, len(cfgs))
	for i, c := range cfgs {
		from, err := newCondition(c.From, set)
		if err != nil {
			return nil, fmt.Errorf("rule %q: from: %w", c.Name, err)
		}
		to, err := newCondition(c.To, set)
		if err != nil {
			return nil, fmt.Errorf("rule %q: to: %w", c.Name, err)
		}
		rs.rules = append(rs.rules, &rule{
			pos: i, name: c.Name, from: from, to: to, joinKeys: c.JoinKeys,
			window: pcommon.Timestamp(c.Window), edge: ":" + c.EdgeType,
			causes: make(map[string]cause), order: make([]string, 0, maxKeys),
		})
	}
	return rs, nil
}

// A rule's phases. A record that leaves the processor is checked as an
// effect (to) and then remembered as a cause (from). A record that waits in the
// hold is remembered as a cause when it arrives, so that effects arriving while
// it waits find it; it is checked as an effect when it leaves.
type phase uint8

const (
	causeOnly phase = iota
	effectAndCause
)

func (rs *ruleSet) applyLog(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord, event golden.EventHash, ph phase) {
	if len(rs.rules) == 0 {
		return
	}
	at := lr.Timestamp()
	if at == 0 {
		at = lr.ObservedTimestamp()
	}
	var tc *ottllog.TransformContext
	rs.apply(lr.Attributes(), rl.Resource().Attributes(), event, at, ph, func(c condition) bool {
		if c.logs == nil {
			return false
		}
		if tc == nil {
			tc = ottllog.NewTransformContext(rl, sl, lr)
		}
		return matches(c.logs, tc)
	})
	if tc != nil {
		tc.Close()
	}
}

func (rs *ruleSet) applySpan(rspans ptrace.ResourceSpans, ss ptrace.ScopeSpans, span ptrace.Span, event golden.EventHash, ph phase) {
	if len(rs.rules) == 0 {
		return
	}
	var tc *ottlspan.TransformContext
	rs.apply(span.Attributes(), rspans.Resource().Attributes(), event, span.StartTimestamp(), ph, func(c condition) bool {
		if c.spans == nil {
			return false
		}
		if tc == nil {
			tc = ottlspan.NewTransformContext(rspans, ss, span)
		}
		return matches(c.spans, tc)
	})
	if tc != nil {
		tc.Close()
	}
}

// apply checks to before from, so that a record is never its own cause. A
// record's to condition is evaluated only when a cause it could be the
// effect of is remembered: most records have none, and conditions are the
// costly part.
func (rs *ruleSet) apply(attrs, resource pcommon.Map, event golden.EventHash, at pcommon.Timestamp, ph phase, match func(condition) bool) {
	for _, r := range rs.rules {
		key, ok := joinKey(r.joinKeys, attrs, resource)
		if !ok {
			continue
		}
		var c cause
		var effect bool
		if ph == effectAndCause {
			c, effect = rs.causeOf(r, key, event, at)
			effect = effect && match(r.to)
		}
		isCause := match(r.from)
		if !effect && !isCause {
			continue
		}
		rs.mu.Lock()
		if effect && addParent(attrs, c.event.String()+r.edge, r.name) {
			rs.counts.ruleHits[r.pos]++
		}
		if isCause {
			rs.remember(r, key, cause{event: event, at: at})
		}
		rs.mu.Unlock()
	}
}

// causeOf returns the cause remembered for key that a record of identity
// event at time at would be an effect of under r, and whether there is one.
func (rs *ruleSet) causeOf(r *rule, key string, event golden.EventHash, at pcommon.Timestamp) (cause, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	c, ok := r.causes[key]
	return c, ok && c.at <= at && at-c.at <= r.window && c.event != event
}

// flushCounts adds the rule hits and evictions so far to the telemetry and
// resets them: taken under rs.mu, flushed after it.
func (rs *ruleSet) flushCounts(ctx context.Context, tel *telemetry) {
	rs.mu.Lock()
	if rs.counts.evicted[tableRuleKeys][evictCapacity] == 0 && !slices.ContainsFunc(rs.counts.ruleHits, func(n int64) bool { return n != 0 }) {
		rs.mu.Unlock()
		return
	}
	taken := rs.counts
	rs.counts = tally{ruleHits: make([]int64, len(taken.ruleHits))}
	rs.mu.Unlock()
	tel.flush(ctx, &taken)
}

// remember keeps the latest cause for a join key, by record time: a record
// remembered again when it leaves the hold does not displace a newer cause.
// The caller holds rs.mu.
func (rs *ruleSet) remember(r *rule, key string, c cause) {
	if old, known := r.causes[key]; known && old.at > c.at {
		return
	} else if !known {
		// A clone: the key may be a slice of a record that the rule must not pin.
		key = strings.Clone(key)
		if len(r.order) < cap(r.order) {
			r.order = append(r.order, key)
		} else {
			delete(r.causes, r.order[r.head])
			rs.counts.evicted[tableRuleKeys][evictCapacity]++
			r.order[r.head] = key
			r.head = (r.head + 1) % len(r.order)
		}
	}
	r.causes[key] = c
}

// joinKey reads the join key values from the record, then from its resource;
// false when one is missing or empty.
func joinKey(names []string, attrs, resource pcommon.Map) (string, bool) {
	if len(names) == 1 {
		return lookup(names[0], attrs, resource)
	}
	values := make([]string, 0, 4)
	for _, name := range names {
		v, ok := lookup(name, attrs, resource)
		if !ok {
			return "", false
		}
		values = append(values, v)
	}
	return strings.Join(values, "\x00"), true
}

func lookup(name string, attrs, resource pcommon.Map) (string, bool) {
	v, ok := attrs.Get(name)
	if !ok {
		if v, ok = resource.Get(name); !ok {
			return "", false
		}
	}
	s := v.AsString()
	return s, s != ""
}

// addParent appends a causal.parents entry and its rule, unless the record
// already has it (a record may pass through two tiers that run the same rule).
func addParent(attrs pcommon.Map, entry, ruleName string) bool {
	parents := sliceAttr(attrs, golden.CausalParents)
	for i := 0; i < parents.Len(); i++ {
		if parents.At(i).Str() == entry {
			return false
		}
	}
	parents.AppendEmpty().SetStr(entry)
	sliceAttr(attrs, golden.CausalRules).AppendEmpty().SetStr(ruleName)
	return true
}

// sliceAttr returns the slice attribute name, replacing a value of another type.
func sliceAttr(attrs pcommon.Map, name string) pcommon.Slice {
	if v, ok := attrs.Get(name); ok && v.Type() == pcommon.ValueTypeSlice {
		return v.Slice()
	}
	return attrs.PutEmptySlice(name)
}
