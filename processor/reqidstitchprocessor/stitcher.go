package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/processor"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/reqshard"
	"github.com/loom-otel/loom/processor/reqidstitchprocessor/internal/metadata"
)

// stitcher is the state one component ID shares between its logs and traces
// processors, so that a log is filled from spans seen in the traces pipeline.
// Records pass through synchronously: a call returns once its records are
// stitched. The index is sharded by request, each shard owned by a goroutine
// that makes every visit to its requests (see owner.go); the services, the
// GPU index and the rules have locks of their own; each processor's hold has
// its own. Each call counts in a pass of its own, flushed to the telemetry
// after; neither anything downstream nor the telemetry is called under any
// of these locks, or by an owner.
type stitcher struct {
	cfg      *Config
	tel      *telemetry
	index    *index
	services *services
	gpu      *gpuIndex // nil when GPU attribution is off
	gpuEvent *ottl.Condition[*ottllog.TransformContext]
	rules    *ruleSet
	now      func() time.Time

	// The ticker that sweeps the holds, and the shards' owners, run while
	// any processor is started.
	owners    *reqshard.Owners[*job]
	lifecycle sync.Mutex
	sweepers  []sweeper
	// holds counts the processors created, by signal: each has a hold.
	holds map[string]int
	stop  chan struct{}
	done  chan struct{}
	// testTicks replaces the ticker in tests: each tick is a channel closed once swept.
	testTicks <-chan chan struct{}
}

func newStitcher(set processor.Settings, cfg *Config) (*stitcher, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	s := &stitcher{
		cfg:      cfg,
		tel:      newTelemetry(tb, cfg.Rules),
		services: newServices(),
		now:      time.Now,
	}
	for _, o := range cfg.options {
		o(s)
	}
	s.index = newIndex(cfg.MaxRequests, int64(cfg.TTL), shardCount(cfg.MaxRequests, runtime.GOMAXPROCS(0)))
	if g := cfg.GPUAttribution; g.Enabled {
		if s.gpuEvent, err = newLogCondition(g.Condition, set.TelemetrySettings); err != nil {
			return nil, err
		}
		s.gpu = newGPUIndex(g.MaxProcesses, g.SpansPerProcess, g.Wait)
	}
	if s.rules, err = newRuleSet(cfg.Rules, cfg.MaxRuleKeys, set.TelemetrySettings); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *stitcher) nowNanos() int64 { return s.now().UnixNano() }

// addPipeline counts a processor created for a pipeline of signal.
func (s *stitcher) addPipeline(signal string) {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	if s.holds == nil {
		s.holds = map[string]int{}
	}
	s.holds[signal]++
}

// pipelines is the number of pipelines of signal using the stitcher.
func (s *stitcher) pipelines(signal string) int {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	return s.holds[signal]
}

// origin is what stitching needs from a record's resource, read once per resource.
type origin struct {
	service   serviceID
	host      string
	container string // container.id; empty outside containers or when not reported
	pid       int64  // 0 when the resource names no process
}

func (s *stitcher) origin(res pcommon.Resource) origin {
	attrs := res.Attributes()
	var o origin
	if v, ok := attrs.Get(string(semconv.ServiceNameKey)); ok {
		o.service = s.services.id(v.AsString())
	}
	if v, ok := attrs.Get(string(semconv.HostNameKey)); ok {
		o.host = v.AsString()
	}
	if v, ok := attrs.Get(string(semconv.ContainerIDKey)); ok {
		o.container = v.AsString()
	}
	o.pid = intAttr(attrs, string(semconv.ProcessPIDKey))
	return o
}

// intAttr reads an integer attribute written as an int or as decimal text; 0 when absent or not a number.
func intAttr(attrs pcommon.Map, name string) int64 {
	v, ok := attrs.Get(name)
	if !ok {
		return 0
	}
	switch v.Type() {
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeStr:
		n, _ := strconv.ParseInt(v.Str(), 10, 64)
		return n
	}
	return 0
}

// reqIDOf reports whether attrs carry a req_id and, when it is one the index can
// use (a non-empty string of bounded length), its value. A req_id of any other
// shape is left alone: present, never indexed, never overwritten.
func reqIDOf(attrs pcommon.Map) (id string, present bool) {
	v, ok := attrs.Get(golden.ReqID)
	if !ok {
		return "", false
	}
	if v.Type() != pcommon.ValueTypeStr || len(v.Str()) > golden.MaxReqIDBytes {
		return "", true
	}
	return v.Str(), true
}

// admit removes from an arriving record the identity attributes it carries
// (its event and the edges into it: set by a client, they could rewrite
// another request's event or add edges to it), unless they come from a
// trusted tier: this collector computes its own. One pass over the record's
// attributes, as it runs on every record. It returns how many it removed.
func (s *stitcher) admit(attrs pcommon.Map) (removed int64) {
	if s.cfg.TrustUpstreamIdentity {
		return 0
	}
	attrs.RemoveIf(func(k string, _ pcommon.Value) bool {
		switch k {
		case golden.EventID, golden.CausalParents, golden.CausalRules, golden.StitchDetached, golden.StitchAsyncOf, golden.ReqIDFrom:
			removed++
			return true
		}
		return false
	})
	return removed
}

// ensureEventID gives the record its event.id unless it already carries a
// well-formed one (set by a trusted tier, or on its way in), and returns it.
func ensureEventID(attrs pcommon.Map, compute func() golden.EventHash) golden.EventHash {
	if v, ok := attrs.Get(golden.EventID); ok && v.Type() == pcommon.ValueTypeStr {
		if h, ok := golden.ParseEventHash(v.Str()); ok {
			return h
		}
	}
	h := compute()
	attrs.PutStr(golden.EventID, h.String())
	return h
}

// markDetached flags a record whose trace is not its request's primary trace
// and names the primary root as the target of its ASYNC_OF edge. It reports
// whether the record was newly marked. Called by r's shard's owner.
func (s *stitcher) markDetached(r *request, trace pcommon.TraceID, attrs pcommon.Map, t *tally) bool {
	if !s.cfg.LinkDetached || r == nil || !r.hasPrimary() || trace.IsEmpty() || trace == r.primaryTrace() {
		return false
	}
	if _, done := attrs.Get(golden.StitchDetached); done {
		return false
	}
	attrs.PutBool(golden.StitchDetached, true)
	attrs.PutStr(golden.StitchAsyncOf, r.rootEvent.String())
	t.detached++
	return true
}
