package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/loom-otel/loom/processor/reqidstitchprocessor/internal/metadata"
)

// The telemetry attribute values metadata.yaml declares.

type direction uint8

const (
	filledTraceContext direction = iota
	filledReqID
	filledGPU
	filledInputHash
	filledModelVer
	filledTraceKey
	numDirections
)

type outcome uint8

const (
	outcomeBound outcome = iota
	outcomeExpired
	outcomeOverflow
	outcomeShutdown
	numOutcomes
)

type table uint8

const (
	tableRequests table = iota
	tableGPUProcesses
	tableGPUSpans
	tableRuleKeys
	numTables
)

type evictReason uint8

const (
	evictCapacity evictReason = iota
	evictTTL
	numReasons
)

// dropCause is why held records the next consumer refused were dropped.
type dropCause uint8

const (
	dropRefused dropCause = iota
	dropRetriesFull
	dropShutdown
	numDropCauses
)

var (
	dropCauseNames = [numDropCauses]string{"refused", "retries_full", "shutdown"}
	directionNames = [numDirections]string{"trace_context", "req_id", "gpu", "input_hash", "model_ver", "trace_key"}
	outcomeNames   = [numOutcomes]string{"bound", "expired", "overflow", "shutdown"}
	tableNames     = [numTables]string{"requests", "gpu_processes", "gpu_spans", "rule_keys"}
	reasonNames    = [numReasons]string{"capacity", "ttl"}
)

// tally counts what one call (a batch, a sweep, a TTL scan) did, or what the
// rules did under their mutex, and is flushed to the telemetry once per call,
// not once per record, and outside every lock.
type tally struct {
	filled   [numDirections]int64
	released [numOutcomes]int64
	evicted  [numTables][numReasons]int64
	ruleHits []int64 // by rule position
	held     int64
	detached int64
	// identityRemoved counts identity attributes taken from arriving records.
	identityRemoved int64
	tracked         int64 // change in the number of tracked requests
}

// add adds what an owner counted for a call (its visits write no rule hits).
func (t *tally) add(o *tally) {
	for d := range t.filled {
		t.filled[d] += o.filled[d]
	}
	for tb := range t.evicted {
		for r := range t.evicted[tb] {
			t.evicted[tb][r] += o.evicted[tb][r]
		}
	}
	t.detached += o.detached
	t.tracked += o.tracked
}

// telemetry is the TelemetryBuilder with every attribute set built once.
type telemetry struct {
	*metadata.TelemetryBuilder
	filled   [numDirections]metric.AddOption
	released [numOutcomes]metric.AddOption
	evicted  [numTables][numReasons]metric.AddOption
	ruleHits []metric.AddOption
	drops    [numDropCauses]metric.AddOption
}

func newTelemetry(tb *metadata.TelemetryBuilder, rules []RuleConfig) *telemetry {
	t := &telemetry{TelemetryBuilder: tb}
	for d := range numDirections {
		t.filled[d] = attrs(attribute.String("direction", directionNames[d]))
	}
	for o := range numOutcomes {
		t.released[o] = attrs(attribute.String("outcome", outcomeNames[o]))
	}
	for tb := range numTables {
		for r := range numReasons {
			t.evicted[tb][r] = attrs(attribute.String("table", tableNames[tb]), attribute.String("reason", reasonNames[r]))
		}
	}
	for c := range numDropCauses {
		t.drops[c] = attrs(attribute.String("cause", dropCauseNames[c]))
	}
	for _, r := range rules {
		t.ruleHits = append(t.ruleHits, attrs(attribute.String("rule", r.Name)))
	}
	return t
}

func attrs(kv ...attribute.KeyValue) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// flush adds the tally to the telemetry and resets it.
func (t *telemetry) flush(ctx context.Context, c *tally) {
	add := func(counter metric.Int64Counter, n *int64, opts ...metric.AddOption) {
		if *n != 0 {
			counter.Add(ctx, *n, opts...)
			*n = 0
		}
	}
	for d := range c.filled {
		add(t.ProcessorReqidstitchRecordsFilled, &c.filled[d], t.filled[d])
	}
	for o := range c.released {
		add(t.ProcessorReqidstitchHoldReleased, &c.released[o], t.released[o])
	}
	for tb := range c.evicted {
		for r := range c.evicted[tb] {
			add(t.ProcessorReqidstitchEvicted, &c.evicted[tb][r], t.evicted[tb][r])
		}
	}
	for i := range c.ruleHits {
		add(t.ProcessorReqidstitchRuleHits, &c.ruleHits[i], t.ruleHits[i])
	}
	add(t.ProcessorReqidstitchRecordsHeld, &c.held)
	add(t.ProcessorReqidstitchRecordsDetached, &c.detached)
	add(t.ProcessorReqidstitchIdentityRemoved, &c.identityRemoved)
	if c.tracked != 0 {
		t.ProcessorReqidstitchTrackedRequests.Add(ctx, c.tracked)
		c.tracked = 0
	}
}

// dropped counts n held records dropped after the next consumer refused them.
func (t *telemetry) dropped(ctx context.Context, cause dropCause, n int) {
	t.ProcessorReqidstitchHoldDropped.Add(ctx, int64(n), t.drops[cause])
}
