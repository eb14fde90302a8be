package goldenfieldprocessor

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/loom-otel/loom/internal/extract"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadata"
)

// Bad-input issues, for the sanitized counter.
type issue uint8

const (
	issueInvalidJSON issue = iota
	issueBodyTooLarge
	issueTooDeep
	issueTooManyFields
	issueInvalidUTF8
	issueValueTruncated
	issueNotAModel
	issueIDTooLong
	issueTooManyConflicts
	numIssues
)

var issueNames = [numIssues]string{"invalid_json", "body_too_large", "too_deep", "too_many_fields", "invalid_utf8", "value_truncated",
	"not_a_model", "id_too_long", "too_many_conflicts"}

// Redaction targets, for the redactions counter.
type target uint8

const (
	targetInput target = iota
	targetAttribute
	targetBody
	targetResource
	targetScope
	targetEvent
	targetLink
	targetSpanName
	targetStatusMessage
	numTargets
)

var targetNames = [numTargets]string{"input", "attribute", "body", "resource", "scope", "event", "link", "span_name", "status_message"}

// Where a severity number was read from, for the severity_parsed counter.
type severitySource uint8

const (
	fromSeverityText severitySource = iota
	fromBody
	numSeveritySources
)

var severitySourceNames = [numSeveritySources]string{"severity_text", "body"}

// otherServices collects the services beyond max_services in the noise ratio.
const otherServices = "_other"

// tally counts one batch; it is flushed to the telemetry once per batch
// instead of once per record.
type tally struct {
	in, valid, invalid int64
	dropped            [numReasons]int64
	redactions         [numTargets]int64
	sanitized          [numIssues]int64
	severityParsed     [numSeveritySources]int64
	failures           map[failure]int64
	conflicts          map[string]int64 // alias conflicts by golden field
	evicted            int64
	drifts             []string // services with a drift detected
}

func (t *tally) limited(l extract.Limited) {
	if l&extract.LimitedDepth != 0 {
		t.sanitized[issueTooDeep]++
	}
	if l&extract.LimitedFields != 0 {
		t.sanitized[issueTooManyFields]++
	}
}

// redacted counts one raw input or sensitive value redacted at where; in a
// record's own attributes raw input is counted apart (targetInput).
func (t *tally) redacted(where target, role *fieldRole) {
	if where == targetAttribute && role.input {
		where = targetInput
	}
	t.redactions[where]++
}

func (t *tally) fail(failures []failure) {
	if len(failures) == 0 {
		return
	}
	if t.failures == nil {
		t.failures = map[failure]int64{}
	}
	for _, f := range failures {
		t.failures[f]++
	}
}

// conflict counts an alias value that lost to a different value of field.
func (t *tally) conflict(field string) {
	if t.conflicts == nil {
		t.conflicts = map[string]int64{}
	}
	t.conflicts[field]++
}

// telemetry reports the processor's own metrics.
type telemetry struct {
	tb    *metadata.TelemetryBuilder
	noise *noiseStats
	// Attribute sets of the enum-valued attributes, built once.
	reasonAttrs [numReasons]metric.AddOption
	targetAttrs [numTargets]metric.AddOption
	issueAttrs  [numIssues]metric.AddOption
	sourceAttrs [numSeveritySources]metric.AddOption
}

func newTelemetry(tb *metadata.TelemetryBuilder, maxServices int) (*telemetry, error) {
	tel := &telemetry{tb: tb, noise: &noiseStats{max: maxServices, counts: map[string]*[2]int64{}}}
	for i, name := range reasonNames {
		tel.reasonAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", name)))
	}
	for i, name := range targetNames {
		tel.targetAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("target", name)))
	}
	for i, name := range issueNames {
		tel.issueAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("issue", name)))
	}
	for i, name := range severitySourceNames {
		tel.sourceAttrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String("source", name)))
	}
	return tel, tb.RegisterProcessorGoldenfieldLogNoiseRatioCallback(tel.noise.observe)
}

func (tel *telemetry) flush(ctx context.Context, t *tally) {
	if t.in == 0 && len(t.drifts) == 0 && t.evicted == 0 {
		return
	}
	tb := tel.tb
	var dropped int64
	for r, n := range t.dropped {
		if n > 0 {
			dropped += n
			tb.ProcessorGoldenfieldRecordsDropped.Add(ctx, n, tel.reasonAttrs[r])
		}
	}
	tb.ProcessorGoldenfieldRecordsIn.Add(ctx, t.in)
	tb.ProcessorGoldenfieldRecordsOut.Add(ctx, t.in-dropped)
	tb.ProcessorGoldenfieldRecordsValid.Add(ctx, t.valid)
	tb.ProcessorGoldenfieldRecordsInvalid.Add(ctx, t.invalid)
	for i, n := range t.redactions {
		if n > 0 {
			tb.ProcessorGoldenfieldRedactions.Add(ctx, n, tel.targetAttrs[i])
		}
	}
	for i, n := range t.sanitized {
		if n > 0 {
			tb.ProcessorGoldenfieldSanitized.Add(ctx, n, tel.issueAttrs[i])
		}
	}
	for i, n := range t.severityParsed {
		if n > 0 {
			tb.ProcessorGoldenfieldSeverityParsed.Add(ctx, n, tel.sourceAttrs[i])
		}
	}
	for f, n := range t.failures {
		tb.ProcessorGoldenfieldValidationFailures.Add(ctx, n, metric.WithAttributes(
			attribute.String("reason", reasonNames[f.reason]), attribute.String("field", f.field)))
	}
	for field, n := range t.conflicts {
		tb.ProcessorGoldenfieldAliasConflicts.Add(ctx, n, metric.WithAttributes(attribute.String("field", field)))
	}
	for _, service := range t.drifts {
		tb.ProcessorGoldenfieldDriftEvents.Add(ctx, 1, metric.WithAttributes(attribute.String("service", service)))
	}
	if t.evicted > 0 {
		tb.ProcessorGoldenfieldDriftSeriesEvicted.Add(ctx, t.evicted)
	}
}

// noiseStats keeps cumulative valid and invalid counts per service, for the
// log-noise ratio gauge; at most max services, the rest under "_other".
type noiseStats struct {
	mu     sync.Mutex
	max    int
	counts map[string]*[2]int64 // service -> {valid, invalid}
}

func (n *noiseStats) add(service string, valid, invalid int64) {
	if valid == 0 && invalid == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.counts[service]
	if c == nil {
		if len(n.counts) >= n.max {
			service = otherServices
		}
		if c = n.counts[service]; c == nil {
			c = &[2]int64{}
			n.counts[strings.Clone(service)] = c
		}
	}
	c[0] += valid
	c[1] += invalid
}

func (n *noiseStats) observe(_ context.Context, o metric.Float64Observer) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for service, c := range n.counts {
		o.Observe(float64(c[1])/float64(max(c[0], 1)), metric.WithAttributes(attribute.String("service", service)))
	}
	return nil
}
