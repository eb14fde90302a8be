package failure

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/internal/golden"
)

func defaultDrift(evicted func()) *Drift {
	return NewDrift(DriftConfig{RareShare: 0.05, SurgeRatio: 4, MinCount: 4, BaselineRecords: 20000, RecentRecords: 400,
		MinBaseline: 200, MaxPlaces: 64, MaxAttributes: 64, MaxValues: 24}, evicted)
}

// outcome is a log record of one place with the attributes set puts.
func outcome(set func(pcommon.Map)) *Record {
	r := logRecord(func(lr plog.LogRecord) { set(lr.Attributes()) })
	r.Service, r.Stage = "renderer", "render/finish"
	return r
}

// judge runs one record through Check and, as a sampler does later, Confirm.
func judge(d *Drift, r *Record) []Reason {
	notes := d.Check(r, nil, 16)
	var out []Reason
	d.Confirm(notes, func(r Reason) { out = append(out, r) })
	return out
}

func TestDriftFlagThatTurnsTrue(t *testing.T) {
	d := defaultDrift(func() {})
	rng := rand.New(rand.NewPCG(1, 2))
	record := func(bad bool) *Record {
		return outcome(func(m pcommon.Map) {
			m.PutBool("frame.empty", bad)
			m.PutStr("quality.tier", []string{"hd", "sd", "uhd"}[rng.IntN(3)])
		})
	}
	for range 2000 {
		assert.Empty(t, judge(d, record(false)))
	}
	// 1500 records: a share that holds for absorbRecords (1600) records is
	// the place's new normal.
	flagged, bad := 0, 0
	for i := range 1500 {
		isBad := i%40 == 0 // 2.5% of the place
		reasons := judge(d, record(isBad))
		if isBad {
			bad++
			if len(reasons) > 0 {
				flagged++
				assert.Equal(t, Reason{Kind: KindValueDrift, Service: "renderer", Stage: "render/finish", Attribute: "frame.empty",
					Value: "true", Baseline: reasons[0].Baseline, Current: reasons[0].Current}, reasons[0])
				assert.Less(t, reasons[0].Baseline, reasons[0].Current)
			}
		} else {
			assert.Empty(t, reasons, "record %d", i)
		}
	}
	// The first few bad records come before the surge is visible in one
	// request's judgement; a sampler judges them decision_wait later.
	assert.GreaterOrEqual(t, flagged, bad-8)
	for i := range 4000 {
		if reasons := judge(d, record(i%40 == 0)); len(reasons) > 0 {
			flagged++
		}
	}
	assert.Less(t, flagged, bad+100, "a share that holds becomes normal")
}

func TestDriftLeavesCommonMinoritiesAlone(t *testing.T) {
	d := defaultDrift(func() {})
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(shares []float64, names []string) string {
		u := rng.Float64()
		for i, s := range shares {
			if u < s {
				return names[i]
			}
			u -= s
		}
		return names[len(names)-1]
	}
	for i := range 30000 {
		reasons := judge(d, outcome(func(m pcommon.Map) {
			m.PutStr("verdict", pick([]float64{.6, .3, .07, .03}, []string{"pass", "soft", "flag", "block"}))
			m.PutInt("retries", int64(pick([]float64{.9, .07, .02, .01}, []string{"0", "1", "2", "3"})[0]-'0'))
			m.PutDouble("wait.seconds", rng.ExpFloat64()*0.2)
			m.PutStr("worker", "w-"+strconv.Itoa(rng.IntN(500))) // an identifier: never an outcome
			if rng.Float64() < 0.97 {
				m.PutStr("trace.note", "x")
			}
		}))
		require.Empty(t, reasons, "record %d: stationary traffic has no drift", i)
	}
}

func TestDriftCountThatDropsToZeroAndJumps(t *testing.T) {
	d := defaultDrift(func() {})
	rng := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		judge(d, outcome(func(m pcommon.Map) {
			m.PutStr("parts.written", strconv.Itoa(1+rng.IntN(9))) // logfmt numbers arrive as strings
			m.PutInt("requeues", int64(rng.IntN(2)))
		}))
	}
	reasons := []Reason{}
	for range 40 {
		reasons = judge(d, outcome(func(m pcommon.Map) { m.PutStr("parts.written", "0"); m.PutInt("requeues", 0) }))
		reasons = append(reasons, judge(d, outcome(func(m pcommon.Map) { m.PutStr("parts.written", "3"); m.PutInt("requeues", 19) }))...)
	}
	require.Len(t, reasons, 2)
	assert.Equal(t, "parts.written", reasons[0].Attribute)
	assert.Equal(t, "0", reasons[0].Value)
	assert.Equal(t, "requeues", reasons[1].Attribute)
	assert.Equal(t, "16..31", reasons[1].Value)
}

func TestDriftFieldThatStopsBeingWritten(t *testing.T) {
	d := defaultDrift(func() {})
	for range 1000 {
		judge(d, outcome(func(m pcommon.Map) { m.PutStr("index.map", "a:1,b:2,c:3,d:4,e:5"); m.PutStr("status", "done") }))
	}
	var reasons []Reason
	for range 30 {
		reasons = judge(d, outcome(func(m pcommon.Map) { m.PutStr("status", "done") }))
		judge(d, outcome(func(m pcommon.Map) { m.PutStr("index.map", "a:1"); m.PutStr("status", "done") }))
	}
	require.Len(t, reasons, 1)
	assert.Equal(t, Reason{Kind: KindValueDrift, Service: "renderer", Stage: "render/finish", Attribute: "index.map", Value: Absent,
		Baseline: reasons[0].Baseline, Current: reasons[0].Current}, reasons[0])
}

func TestDriftChangeThatTakesOverBecomesNormal(t *testing.T) {
	d := defaultDrift(func() {})
	for range 1000 {
		judge(d, outcome(func(m pcommon.Map) { m.PutStr("codec", "opus") }))
	}
	flagged := 0
	for range 20000 {
		if len(judge(d, outcome(func(m pcommon.Map) { m.PutStr("codec", "flac") }))) > 0 {
			flagged++
		}
	}
	assert.Positive(t, flagged)
	assert.Empty(t, judge(d, outcome(func(m pcommon.Map) { m.PutStr("codec", "flac") })), "every record changed: the new normal")
}

func TestDriftIgnoresDimensionsAndIsBounded(t *testing.T) {
	evicted := 0
	d := NewDrift(DriftConfig{RareShare: 0.05, SurgeRatio: 4, MinCount: 4, BaselineRecords: 20000, RecentRecords: 400,
		MinBaseline: 10, MaxPlaces: 16, MaxAttributes: 4, MaxValues: 8}, func() { evicted++ })
	for i := range 500 {
		notes := d.Check(outcome(func(m pcommon.Map) {
			m.PutStr("build", "v2."+strconv.Itoa(i)) // versions and ids are dimensions
			m.PutStr("shape", "s"+string(rune('a'+i%26)))
			m.PutStr("req_id", "req-"+strconv.Itoa(i))
			m.PutStr("golden.missing", "x")
			m.PutBool("stitch.detached", i%2 == 0) // Loom's own, and timing-dependent
			m.PutEmptyMap("nested").PutStr("k", "v")
			for k := range 10 {
				m.PutBool("flag"+strconv.Itoa(k), true)
			}
		}), nil, 16)
		for _, n := range notes {
			assert.NotContains(t, []string{"build", "req_id", "golden.missing", "stitch.detached", "nested", "shape"}, n.attr.name)
		}
	}
	p, _ := d.places.shards[placeKey{service: "renderer", stage: "render/finish"}.shard()].lru.Peek(placeKey{service: "renderer", stage: "render/finish"})
	assert.Len(t, p.list, 4, "max_attributes")
	for _, a := range p.list {
		assert.LessOrEqual(t, len(a.values), 8, a.name)
	}
	assert.True(t, p.attrs["shape"] == nil || p.attrs["shape"].dimension, "26 values > max_values: not an outcome")
	for i := range 40 {
		r := outcome(func(m pcommon.Map) { m.PutBool("ok", true) })
		r.Stage = "stage" + strconv.Itoa(i)
		d.Check(r, nil, 16)
	}
	assert.LessOrEqual(t, d.places.len(), 16)
	assert.Equal(t, 41-d.places.len(), evicted)
}

func TestMagnitude(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 1: "1", 1.5: "1", 2: "2..3", 3: "2..3", 7: "4..7", 1000: "512..1023",
		-5: "-4..7", 0.25: "0.2..0.3", 0.05: "0.0..0.1", 0.999: "0.9..1.0", -0.5: "-0..1"} {
		got, _ := magnitude(nil, f)
		assert.Equal(t, want, string(got), "%v", f)
	}
}

// A rare magnitude within the baseline's range is the traffic's mix (longer
// prompts for a while), not an outcome: only zero and magnitudes beyond the
// baseline's range are.
func TestDriftMixShiftIsNotAFailure(t *testing.T) {
	d := defaultDrift(func() {})
	rng := rand.New(rand.NewPCG(7, 8))
	tokens := func() int64 {
		if rng.Float64() < 0.02 {
			return 20 + rng.Int64N(10) // a rare short-prompt family
		}
		return 100 + rng.Int64N(400)
	}
	for range 2000 {
		judge(d, outcome(func(m pcommon.Map) { m.PutInt("prompt.tokens", tokens()) }))
	}
	for i := range 2000 {
		n := tokens()
		if i%4 == 0 {
			n = 20 + rng.Int64N(10) // the short family surges to a quarter of the traffic
		}
		require.Empty(t, judge(d, outcome(func(m pcommon.Map) { m.PutInt("prompt.tokens", n) })), "record %d", i)
	}
}

// A stationary minority value (0.5% to 6% of its place, about the rare
// bound) should not become a lasting surge, whatever a thin early baseline
// made of it by chance. Judged over many seeds: a discount that fed itself
// pinned 17 of 240 such values as surging (2455 false flags in 1.44M records)
// before values seen from a place's first records waited for a thick baseline
// to rise; 10 (717 flags) remain, values first seen a few blocks in.
func TestDriftValueNearTheRareBoundStaysQuiet(t *testing.T) {
	const seeds, records = 240, 6000
	flagged, pinned := 0, 0
	for seed := range uint64(seeds) {
		d := NewDrift(DriftConfig{RareShare: 0.05, SurgeRatio: 4, MinCount: 4, BaselineRecords: 20000, RecentRecords: 400,
			MinBaseline: 100, MaxPlaces: 64, MaxAttributes: 64, MaxValues: 24}, func() {})
		rng := rand.New(rand.NewPCG(seed, 7))
		share := 0.005 + 0.055*float64(seed%12)/11
		n := 0
		for range records {
			reasons := judge(d, outcome(func(m pcommon.Map) {
				evicted := 1 + rng.IntN(7)
				if rng.Float64() < share {
					evicted = 32 + rng.IntN(32)
				}
				m.PutInt("blocks.evicted", int64(evicted))
			}))
			n += min(len(reasons), 1)
		}
		flagged += n
		if n > 3 {
			pinned++
		}
	}
	t.Logf("stationary minorities: %d of %d records flagged, %d of %d values flagged more than 3 times", flagged, seeds*records, pinned, seeds)
	assert.LessOrEqual(t, float64(flagged), 0.0008*seeds*records)
	assert.LessOrEqual(t, float64(pinned), 0.05*seeds)
}

// A duration in the golden latency field is the latency detector's evidence:
// its tail is never a drifting value.
func TestDriftLeavesLatencyToTheLatencyDetector(t *testing.T) {
	d := defaultDrift(func() {})
	for range 1000 {
		judge(d, outcome(func(m pcommon.Map) { m.PutDouble(golden.LatencyMs, 3) }))
	}
	for range 40 {
		assert.Empty(t, judge(d, outcome(func(m pcommon.Map) { m.PutDouble(golden.LatencyMs, 900) })))
	}
}
