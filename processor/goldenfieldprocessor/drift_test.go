package goldenfieldprocessor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/processor/goldenfieldprocessor/internal/metadatatest"
)

// s1Request returns the records of request i of scenario S1: from request 100
// on, every 8th request is served by the upgraded model v2.3.2, which no longer
// writes raw_output_hash, so postproc/filter returns an empty output.
func s1Request(i int) []rec {
	id := fmt.Sprintf("req-%013d-%06d", 1715234890000+i, i)
	upgraded := i >= 100 && i%8 == 0
	version := "llama3-8b-v2.3.1"
	forward := fmt.Sprintf(`{"level":"info","msg":"forward done","req_id":%q,"stage":"model/forward","model_ver":%q,"latency_ms":820,"gpu_mem_mb":10240,"prompt":"hello %d"`, id, version, i)
	if upgraded {
		forward = fmt.Sprintf(`{"level":"info","msg":"forward done","req_id":%q,"stage":"model/forward","model_ver":"llama3-8b-v2.3.2","latency_ms":815,"gpu_mem_mb":10240,"prompt":"hello %d"`, id, i)
	} else {
		forward += fmt.Sprintf(`,"raw_output_hash":"%08x"`, i)
	}
	forward += "}"
	postproc := fmt.Sprintf("level=info stage=postproc/filter req_id=%s output_length=412", id)
	if upgraded {
		postproc = fmt.Sprintf("level=info stage=postproc/filter req_id=%s output_length=0 filter_reason=empty_after_dedup", id)
	}
	ts := func(lr plog.LogRecord) {
		lr.SetTimestamp(pcommon.NewTimestampFromTime(time.UnixMilli(1715234890000 + int64(i)*100)))
	}
	return []rec{{service: "model", body: forward, mutateLog: ts}, {service: "postproc", body: postproc, mutateLog: ts}}
}

func TestSchemaDriftS1(t *testing.T) {
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	sink := new(consumertest.LogsSink)
	p, err := NewFactory().CreateLogs(context.Background(), metadatatest.NewSettings(tel), defaultConfig(), sink)
	require.NoError(t, err)

	var drift []plog.LogRecord
	emptyBeforeDrift, marked, upgradedAfterDrift := 0, 0, 0
	for batch := 0; batch < 60; batch++ { // 600 requests, 10 per batch
		var recs []rec
		for i := batch * 10; i < batch*10+10; i++ {
			recs = append(recs, s1Request(i)...)
		}
		before := len(sink.AllLogs())
		require.NoError(t, p.ConsumeLogs(context.Background(), makeLogs(t, recs...)))
		for _, lr := range logRecords(sink.AllLogs()[before:]) {
			switch {
			case lr.EventName() == golden.SchemaDriftEvent:
				drift = append(drift, lr)
			case lr.Attributes().AsRaw()["filter_reason"] == "empty_after_dedup" && len(drift) == 0:
				emptyBeforeDrift++
			}
			a := lr.Attributes().AsRaw()
			if a[golden.ModelVer] == "llama3-8b-v2.3.2" && len(drift) > 0 {
				upgradedAfterDrift++
			}
			if _, ok := a[golden.DriftFieldsLost]; ok {
				marked++
				assert.Equal(t, []any{"raw_output_hash"}, a[golden.DriftFieldsLost])
				assert.Equal(t, "llama3-8b-v2.3.1", a[golden.DriftOldModelVer])
				assert.Equal(t, "llama3-8b-v2.3.2", a[golden.ModelVer], "only the drifted version's records are marked")
			}
		}
	}
	require.NoError(t, p.Shutdown(context.Background()))

	require.Len(t, drift, 1, "exactly one drift record")
	d := drift[0].Attributes()
	assert.Equal(t, []string{"raw_output_hash"}, strList(d, golden.DriftFieldsLost))
	assert.Equal(t, "llama3-8b-v2.3.1", d.AsRaw()[golden.DriftOldModelVer])
	assert.Equal(t, "llama3-8b-v2.3.2", d.AsRaw()[golden.DriftNewModelVer])
	assert.Equal(t, "model", d.AsRaw()["service.name"])
	assert.Equal(t, "model/forward", d.AsRaw()[golden.Stage])
	assert.Equal(t, golden.SchemaDriftEvent, d.AsRaw()["event.name"])
	assert.Equal(t, map[string]any{"raw_output_hash": map[string]any{"old": 1.0, "new": 0.0}}, d.AsRaw()[golden.DriftRates])
	assert.Equal(t, time.UnixMilli(1715234890000+104*100).UTC().Format(time.RFC3339Nano), d.AsRaw()[golden.DriftFirstSeen])
	assert.Contains(t, drift[0].Body().Str(), "raw_output_hash (100% -> 0%)")
	// The drift fires once min_records (10) upgraded requests were seen: before the empty outputs pile up.
	t.Logf("empty outputs before the drift record: %d", emptyBeforeDrift)
	assert.LessOrEqual(t, emptyBeforeDrift, 10)
	assert.Greater(t, emptyBeforeDrift, 0)
	// From the record that completes the evidence on, every record of the
	// upgraded version says what it lost: its request's failure reason.
	assert.Greater(t, upgradedAfterDrift, 50)
	assert.Equal(t, upgradedAfterDrift+1, marked)

	metadatatest.AssertEqualProcessorGoldenfieldDriftEvents(t, tel, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("service", "model"))},
	}, metricdatatest.IgnoreTimestamp())
}

func TestDriftTracker(t *testing.T) {
	cfg := defaultConfig().Drift
	cfg.MinRecords = 10
	at := time.Unix(0, 0)
	key := lineageKey{signalLogs, "model", "model/forward", ""}
	feed := func(tr *driftTracker, version string, n int, attrs map[string]any) (events []*driftEvent) {
		m := pcommon.NewMap()
		require.NoError(t, m.FromRaw(attrs))
		for range n {
			if _, e, _ := tr.observe(key, version, m, at); e != nil {
				events = append(events, e)
			}
		}
		return events
	}
	base := map[string]any{"model_ver": "x", "req_id": "r", "raw_output_hash": "h"}

	t.Run("no drift while fields are kept", func(t *testing.T) {
		tr := newDriftTracker(cfg)
		assert.Empty(t, feed(tr, "v1", 30, base))
		assert.Empty(t, feed(tr, "v2", 30, map[string]any{"model_ver": "x", "req_id": "r", "raw_output_hash": "h", "extra": 1}))
	})
	t.Run("lost and gained fields, reported once", func(t *testing.T) {
		tr := newDriftTracker(cfg)
		feed(tr, "v1", 30, base)
		events := feed(tr, "v2", 50, map[string]any{"model_ver": "x", "req_id": "r", "output_digest": "d"})
		require.Len(t, events, 1)
		assert.Equal(t, []fieldRate{{"raw_output_hash", 1, 0}}, events[0].lost)
		assert.Equal(t, []fieldRate{{"output_digest", 0, 1}}, events[0].gained)
		assert.Equal(t, uint64(10), events[0].newRecords, "fires as soon as min_records of the new version are in")
	})
	t.Run("a field only sometimes present is not drift", func(t *testing.T) {
		tr := newDriftTracker(cfg)
		feed(tr, "v1", 20, base)
		feed(tr, "v1", 20, map[string]any{"model_ver": "x", "req_id": "r"})
		assert.Empty(t, feed(tr, "v2", 30, map[string]any{"model_ver": "x", "req_id": "r"}))
	})
	t.Run("the old version needs min_records too", func(t *testing.T) {
		tr := newDriftTracker(cfg)
		feed(tr, "v1", 5, base)
		assert.Empty(t, feed(tr, "v2", 10, map[string]any{"req_id": "r"}))
		feed(tr, "v1", 5, base)
		assert.Len(t, feed(tr, "v2", 10, map[string]any{"req_id": "r"}), 1, "checked again after more records")
	})
	t.Run("bounded with eviction", func(t *testing.T) {
		small := cfg
		small.MaxSeries = 3
		tr := newDriftTracker(small)
		evicted := 0
		m := pcommon.NewMap()
		for i := range 10 {
			n, _, _ := tr.observe(lineageKey{signalLogs, "svc", fmt.Sprint(i), ""}, "v", m, at)
			evicted += n
		}
		assert.Equal(t, 7, evicted)
		assert.Equal(t, 3, tr.lru.Len())
		assert.Len(t, tr.lineages, 3)
	})
	t.Run("fields per series are bounded", func(t *testing.T) {
		small := cfg
		small.MaxFields = 2
		tr := newDriftTracker(small)
		feed(tr, "v1", 1, map[string]any{"a": 1, "b": 2, "c": 3})
		assert.Len(t, tr.lineages[key].versions[0].names, 2)
	})
}

// Drift seen in spans is reported through the logs pipeline of the same processor.
func TestDriftFromSpansReachesLogs(t *testing.T) {
	f := NewFactory()
	set := settings(nil)
	set.ID = component.MustNewIDWithName("goldenfield", "shared")
	cfg := defaultConfig()
	logsSink, tracesSink := new(consumertest.LogsSink), new(consumertest.TracesSink)
	lp, err := f.CreateLogs(context.Background(), set, cfg, logsSink)
	require.NoError(t, err)
	tp, err := f.CreateTraces(context.Background(), set, cfg, tracesSink)
	require.NoError(t, err)

	span := func(version string, hash bool) rec {
		attrs := map[string]any{"model_ver": version, "stage": "model/forward"}
		if hash {
			attrs["raw_output_hash"] = "h"
		}
		return rec{service: "model", attrs: attrs}
	}
	for range 20 {
		require.NoError(t, tp.ConsumeTraces(context.Background(), makeTraces(t, span("llama3-8b-v1", true))))
	}
	for range 20 {
		require.NoError(t, tp.ConsumeTraces(context.Background(), makeTraces(t, span("llama3-8b-v2", false))))
	}
	require.NoError(t, lp.ConsumeLogs(context.Background(), makeLogs(t, rec{body: "unrelated"})))
	require.NoError(t, lp.Shutdown(context.Background()))
	require.NoError(t, tp.Shutdown(context.Background()))

	var drift []plog.LogRecord
	for _, lr := range logRecords(logsSink.AllLogs()) {
		if lr.EventName() == golden.SchemaDriftEvent {
			drift = append(drift, lr)
		}
	}
	require.Len(t, drift, 1)
	assert.Equal(t, signalTraces, drift[0].Attributes().AsRaw()[golden.DriftSignal])
}

// The same version change seen in spans and in logs (S1: the model's spans and
// its log lines both lose raw_output_hash) is one drift, reported once.
func TestDriftInBothSignalsReportedOnce(t *testing.T) {
	f := NewFactory()
	set := settings(nil)
	set.ID = component.MustNewIDWithName("goldenfield", "both")
	cfg := defaultConfig()
	logsSink := new(consumertest.LogsSink)
	lp, err := f.CreateLogs(context.Background(), set, cfg, logsSink)
	require.NoError(t, err)
	tp, err := f.CreateTraces(context.Background(), set, cfg, new(consumertest.TracesSink))
	require.NoError(t, err)

	record := func(version string, hash bool) rec {
		attrs := map[string]any{"model_ver": version, "stage": "model/forward"}
		if hash {
			attrs["raw_output_hash"] = "h"
		}
		return rec{service: "model", attrs: attrs}
	}
	for _, phase := range []struct {
		version string
		hash    bool
	}{{"llama3-8b-v1", true}, {"llama3-8b-v2", false}} {
		for range 20 {
			require.NoError(t, tp.ConsumeTraces(context.Background(), makeTraces(t, record(phase.version, phase.hash))))
			require.NoError(t, lp.ConsumeLogs(context.Background(), makeLogs(t, record(phase.version, phase.hash))))
		}
	}
	require.NoError(t, lp.Shutdown(context.Background()))
	require.NoError(t, tp.Shutdown(context.Background()))

	drifts := 0
	for _, lr := range logRecords(logsSink.AllLogs()) {
		if lr.EventName() == golden.SchemaDriftEvent {
			drifts++
		}
	}
	assert.Equal(t, 1, drifts)
}

// A second goldenfield tier (agent, then gateway) passes drift records on
// untouched and does not count upstream outcome attributes as fields.
func TestSecondTier(t *testing.T) {
	tr := newDriftTracker(defaultConfig().Drift)
	m := pcommon.NewMap()
	require.NoError(t, m.FromRaw(map[string]any{golden.ValidAttr: false, golden.MissingAttr: []any{"req_id"}, "x": 1}))
	tr.observe(lineageKey{signalLogs, "s", "st", ""}, "v1", m, time.Unix(0, 0))
	assert.Equal(t, []string{"x"}, tr.lineages[lineageKey{signalLogs, "s", "st", ""}].versions[0].names)

	ld := plog.NewLogs()
	(&driftEvent{key: lineageKey{signalLogs, "model", "model/forward", ""}, oldVersion: "v1", newVersion: "v2",
		lost: []fieldRate{{"raw_output_hash", 1, 0}}}).appendTo(ld, time.Unix(0, 0))
	want := plog.NewLogs()
	ld.CopyTo(want)
	out := runLogs(t, defaultConfig(), ld)
	require.Len(t, out, 1)
	assert.Equal(t, logRecords([]plog.Logs{want})[0].Attributes().AsRaw(), out[0].Attributes().AsRaw())
}

// Drift compares canonical names: renaming a field to another alias of the
// same golden field is not a loss.
func TestDriftIgnoresAliasRenames(t *testing.T) {
	var recs []rec
	for i := range 40 {
		attrs := map[string]any{"stage": "model/forward", "model_ver": "v1", "request_id": "req-1715234890123-a1b2c3"}
		if i >= 20 {
			attrs = map[string]any{"stage": "model/forward", "model_ver": "v2", "x_request_id": "req-1715234890123-a1b2c3"}
		}
		recs = append(recs, rec{service: "model", attrs: attrs})
	}
	for _, lr := range runLogs(t, defaultConfig(), makeLogs(t, recs...)) {
		assert.NotEqual(t, golden.SchemaDriftEvent, lr.EventName())
	}
}

// A service that serves two models (a text and an image one) alternates
// between two lineages, and their different fields are no drift; an upgrade
// of one of them that stops writing a field is.
func TestDriftComparesVersionsOfOneModel(t *testing.T) {
	cfg := defaultConfig()
	cfg.Drift.MinRecords = 10
	sink := new(consumertest.LogsSink)
	lp, err := NewFactory().CreateLogs(context.Background(), settings(nil), cfg, sink)
	require.NoError(t, err)
	record := func(model string, fields ...string) rec {
		attrs := map[string]any{"model_ver": model, "stage": "engine/generate", "req_id": "req-1715234890000-abcdef"}
		for _, f := range fields {
			attrs[f] = "x"
		}
		return rec{service: "engine", attrs: attrs}
	}
	for range 30 {
		require.NoError(t, lp.ConsumeLogs(context.Background(), makeLogs(t,
			record("phi3-mini-128k-v3.1", "segment_map", "tokens_out"), record("sdxl-turbo-v1.0", "image_digest"))))
	}
	drifts := func() (n int) {
		for _, lr := range logRecords(sink.AllLogs()) {
			if lr.EventName() == golden.SchemaDriftEvent {
				n++
			}
		}
		return n
	}
	assert.Zero(t, drifts(), "two models are not two versions")
	for range 30 {
		require.NoError(t, lp.ConsumeLogs(context.Background(), makeLogs(t,
			record("phi3-mini-128k-v3.2", "tokens_out"), record("sdxl-turbo-v1.0", "image_digest"))))
	}
	assert.Equal(t, 1, drifts(), "the text model's upgrade lost segment_map")
	require.NoError(t, lp.Shutdown(context.Background()))
}

// A canary version served beside the stable one, all its requests failing:
// its error records carry error fields the stable version's records lack,
// which is no schema drift of either.
func TestDriftLeavesErrorRecordsOut(t *testing.T) {
	cfg := defaultConfig()
	cfg.Drift.MinRecords = 10
	sink := new(consumertest.LogsSink)
	lp, err := NewFactory().CreateLogs(context.Background(), settings(nil), cfg, sink)
	require.NoError(t, err)
	record := func(model string, severity plog.SeverityNumber, fields ...string) rec {
		attrs := map[string]any{"model_ver": model, "stage": "llm/complete", "req_id": "req-1715234890000-abcdef", "tokens_out": "7"}
		for _, f := range fields {
			attrs[f] = "x"
		}
		return rec{service: "assistant", attrs: attrs, mutateLog: func(lr plog.LogRecord) { lr.SetSeverityNumber(severity) }}
	}
	for range 40 {
		require.NoError(t, lp.ConsumeLogs(context.Background(), makeLogs(t,
			record("chat-13b-v2.2.0", plog.SeverityNumberError, "error_type", "status_code"),
			record("chat-13b-v2.1.4", plog.SeverityNumberInfo))))
	}
	for _, lr := range logRecords(sink.AllLogs()) {
		assert.NotEqual(t, golden.SchemaDriftEvent, lr.EventName(), "%v", lr.Attributes().AsRaw())
		_, marked := lr.Attributes().Get(golden.DriftFieldsLost)
		assert.False(t, marked, "%v", lr.Attributes().AsRaw())
	}
	require.NoError(t, lp.Shutdown(context.Background()))
}
