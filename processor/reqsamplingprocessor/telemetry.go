package reqsamplingprocessor

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/loom-otel/loom/processor/reqsamplingprocessor/internal/metadata"
)

type outcome uint8

const (
	outcomeKept outcome = iota
	outcomeDropped
	// outcomeHandedOver: forwarded to the gateway that owns the request.
	outcomeHandedOver
	numOutcomes
)

func outcomeOf(kept bool) outcome {
	if kept {
		return outcomeKept
	}
	return outcomeDropped
}

type earlyReason uint8

const (
	earlyMaxRequests earlyReason = iota
	earlyMaxBytes
	earlyShutdown
	numEarlyReasons
)

type state uint8

const (
	stateDecisionCache state = iota
	stateInputHash
	stateLatencySeries
	stateDriftPlace
	numStates
)

var (
	signalNames  = [numSignals]string{"logs", "traces"}
	outcomeNames = [numOutcomes]string{"kept", "dropped", "handed_over"}
	causeNames   = [numCauses]string{"arrival", "member_change", "shutdown"}
	earlyNames   = [numEarlyReasons]string{"max_requests", "max_bytes", "shutdown"}
	stateNames   = [numStates]string{"decision_cache", "input_hash", "latency_series", "drift_place"}
)

// Bucket labels of requests whose input_hash has no prefix bucket.
const (
	bucketNone  = "none"
	bucketOther = "other"
)

// telemetry reports the processor's own metrics with attribute sets built once.
type telemetry struct {
	tb *metadata.TelemetryBuilder
	// ctx is the context of every measurement: the processor's own.
	ctx       context.Context
	records   [numSignals][numOutcomes]metric.MeasurementOption
	late      [numSignals][numOutcomes]metric.MeasurementOption
	decisions [][numOutcomes]metric.MeasurementOption // by policy index + 1; 0 is the base rate
	policies  []metric.AddOption                      // by policy index + 1
	errors    []metric.MeasurementOption              // by policy index
	early     [numEarlyReasons]metric.MeasurementOption
	evictions [numStates]metric.MeasurementOption
	// pushes and entries are the share results, by success.
	pushes, entries [2]metric.MeasurementOption
	// handedOver is by signal, cause and success; takenOver by signal.
	handedOver [numSignals][numCauses][2]metric.MeasurementOption
	takenOver  [numSignals]metric.MeasurementOption
	// buckets is used under the sampler's lock; at most 16^3+2 entries.
	buckets map[string]metric.MeasurementOption
}

func newTelemetry(tb *metadata.TelemetryBuilder, policies []compiledPolicy) *telemetry {
	t := &telemetry{tb: tb, ctx: context.Background(), buckets: map[string]metric.MeasurementOption{}}
	for s := range numSignals {
		for o := range numOutcomes {
			set := metric.WithAttributes(attribute.String("signal", signalNames[s]), attribute.String("outcome", outcomeNames[o]))
			t.records[s][o], t.late[s][o] = set, set
		}
	}
	names := []string{basePolicy}
	for _, p := range policies {
		names = append(names, p.name)
		t.errors = append(t.errors, metric.WithAttributes(attribute.String("policy", p.name)))
	}
	t.decisions = make([][numOutcomes]metric.MeasurementOption, len(names))
	for _, name := range names {
		t.policies = append(t.policies, metric.WithAttributes(attribute.String("policy", name)))
	}
	for i, name := range names {
		for o := range numOutcomes {
			t.decisions[i][o] = metric.WithAttributes(attribute.String("policy", name), attribute.String("outcome", outcomeNames[o]))
		}
	}
	for s := range numSignals {
		sig := attribute.String("signal", signalNames[s])
		t.takenOver[s] = metric.WithAttributes(sig)
		for c := range numCauses {
			cause := attribute.String("cause", causeNames[c])
			t.handedOver[s][c] = [2]metric.MeasurementOption{metric.WithAttributes(sig, cause, attribute.String("result", "failed")),
				metric.WithAttributes(sig, cause, attribute.String("result", "sent"))}
		}
	}
	for r := range numEarlyReasons {
		t.early[r] = metric.WithAttributes(attribute.String("reason", earlyNames[r]))
	}
	for s := range numStates {
		t.evictions[s] = metric.WithAttributes(attribute.String("state", stateNames[s]))
	}
	t.pushes = [2]metric.MeasurementOption{metric.WithAttributes(attribute.String("result", "failed")),
		metric.WithAttributes(attribute.String("result", "sent"))}
	t.entries = [2]metric.MeasurementOption{metric.WithAttributes(attribute.String("result", "rejected")),
		metric.WithAttributes(attribute.String("result", "accepted"))}
	return t
}

func (t *telemetry) evicted(s state) {
	t.tb.ProcessorReqsamplingEvictions.Add(t.ctx, 1, t.evictions[s])
}

func (t *telemetry) lateFailure() {
	t.tb.ProcessorReqsamplingLateFailures.Add(t.ctx, 1)
}

func (t *telemetry) decidedEarly(r earlyReason) {
	t.tb.ProcessorReqsamplingEarlyDecisions.Add(t.ctx, 1, t.early[r])
}

// pushed counts a message of learned state pushed to a peer.
func (t *telemetry) pushed(sent bool, bytes int) {
	t.tb.ProcessorReqsamplingSharePushes.Add(t.ctx, 1, t.pushes[b2i(sent)])
	if sent {
		t.tb.ProcessorReqsamplingSharePushedBytes.Add(t.ctx, int64(bytes))
	}
}

// shareReceived counts the entries of learned state a peer pushed.
func (t *telemetry) shareReceived(accepted, rejected int) {
	if accepted > 0 {
		t.tb.ProcessorReqsamplingShareReceived.Add(t.ctx, int64(accepted), t.entries[1])
	}
	if rejected > 0 {
		t.tb.ProcessorReqsamplingShareReceived.Add(t.ctx, int64(rejected), t.entries[0])
	}
}

// shareDropped counts the entries of learned state that were not pushed.
func (t *telemetry) shareDropped(n int) {
	if n > 0 {
		t.tb.ProcessorReqsamplingShareDropped.Add(t.ctx, int64(n))
	}
}

// handedOverRecords counts n records forwarded to their owner, sent or not.
func (t *telemetry) handedOverRecords(s signal, c handoverCause, sent bool, n int) {
	t.tb.ProcessorReqsamplingHandedOverRecords.Add(t.ctx, int64(n), t.handedOver[s][c][b2i(sent)])
}

// takenOverRecords counts n records another gateway handed over.
func (t *telemetry) takenOverRecords(s signal, n int) {
	t.tb.ProcessorReqsamplingTakenOverRecords.Add(t.ctx, int64(n), t.takenOver[s])
}

// policyFailed counts a record policy i could not evaluate.
func (t *telemetry) policyFailed(i int) {
	t.tb.ProcessorReqsamplingPolicyErrors.Add(t.ctx, 1, t.errors[i])
}

// throttled counts a request the volume guard took from policy v.policy.
func (t *telemetry) throttled(v verdict) {
	t.tb.ProcessorReqsamplingThrottled.Add(t.ctx, 1, t.policies[v.policy+1])
}

func (t *telemetry) decided(v verdict) {
	t.tb.ProcessorReqsamplingDecisions.Add(t.ctx, 1, t.decisions[v.policy+1][outcomeOf(v.kept)])
}

// bucketDecided counts a decided request in its input_hash bucket.
func (t *telemetry) bucketDecided(label string, failed, kept bool) {
	set, ok := t.buckets[label]
	if !ok {
		set = metric.WithAttributes(attribute.String("bucket", label))
		t.buckets[label] = set
	}
	t.tb.ProcessorReqsamplingBucketRequests.Add(t.ctx, 1, set)
	if failed {
		t.tb.ProcessorReqsamplingBucketFailures.Add(t.ctx, 1, set)
	}
	if kept {
		t.tb.ProcessorReqsamplingBucketKept.Add(t.ctx, 1, set)
	}
}

// released counts a batch's records as they leave: [late][outcome].
func (t *telemetry) released(s signal, counts [2][numOutcomes]int64) {
	for o := range numOutcomes {
		if n := counts[0][o] + counts[1][o]; n > 0 {
			t.tb.ProcessorReqsamplingRecords.Add(t.ctx, n, t.records[s][o])
		}
		if n := counts[1][o]; n > 0 {
			t.tb.ProcessorReqsamplingLateRecords.Add(t.ctx, n, t.late[s][o])
		}
	}
}

// registerGauges reports the observable gauges from what the sampler publishes.
func (t *telemetry) registerGauges(s *sampler) error {
	kindHash := metric.WithAttributes(attribute.String("kind", "input_hash"))
	kindBucket := metric.WithAttributes(attribute.String("kind", "bucket"))
	return errors.Join(
		t.tb.RegisterProcessorReqsamplingPendingRequestsCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(s.pendingRequests())
			return nil
		}),
		t.tb.RegisterProcessorReqsamplingPendingBytesCallback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(s.pendingBytes())
			return nil
		}),
		t.tb.RegisterProcessorReqsamplingHotInputsCallback(func(_ context.Context, o metric.Int64Observer) error {
			m := s.HeatMap()
			hotBuckets := 0
			for _, b := range m.Buckets {
				if b.Hot {
					hotBuckets++
				}
			}
			o.Observe(int64(len(m.HotInputs)), kindHash)
			o.Observe(int64(hotBuckets), kindBucket)
			return nil
		}),
		t.tb.RegisterProcessorReqsamplingHotInputFailureRateCallback(func(_ context.Context, o metric.Float64Observer) error {
			hot := s.HeatMap().HotInputs
			for _, h := range hot[:min(len(hot), maxHotReported)] {
				o.Observe(h.FailureRate, metric.WithAttributes(attribute.String("hash", h.InputHash)))
			}
			return nil
		}),
	)
}

// maxHotReported bounds the hot hashes reported as metric series.
const maxHotReported = 100

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
