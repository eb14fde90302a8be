package failure

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func sharedDrift(minBaseline float64, evicted func()) *Drift {
	return NewDrift(DriftConfig{RareShare: 0.05, SurgeRatio: 4, MinCount: 4, BaselineRecords: 2000, RecentRecords: 400,
		MinBaseline: minBaseline, MaxPlaces: 64, MaxAttributes: 8, MaxValues: 24, Outbox: 1024}, evicted)
}

// exchange hands each drift's blocks and recent records to the others.
func exchange(t *testing.T, drifts ...*Drift) {
	t.Helper()
	for i, from := range drifts {
		blocks, dropped := from.TakeBlocks()
		require.Zero(t, dropped)
		recent, dropped := from.TakeRecent()
		require.Zero(t, dropped)
		for j, to := range drifts {
			if i == j {
				continue
			}
			for k := range blocks {
				require.NoError(t, to.MergeBlock(&blocks[k]))
			}
			for k := range recent {
				require.NoError(t, to.MergeRecent(&recent[k]))
			}
		}
	}
}

// learnedOf returns, as of reads each cell, the place's records and every
// attribute's and value's count.
func learnedOf(d *Drift, r *Record, of func(p *driftPlace, c *cell) float64) (records float64, counts map[string]float64) {
	counts = map[string]float64{}
	key := placeKey{service: r.Service, stage: r.Stage, span: r.IsSpan}
	sh, p := d.places.acquire(key, newDriftPlace)
	defer sh.mu.Unlock()
	for _, a := range p.list {
		counts[a.name] = of(p, &a.present)
		for _, v := range a.values {
			counts[a.name+"="+v.value] = of(p, &v.c)
		}
	}
	return of(p, &p.n), counts
}

// baselineOf returns the place's baseline records and every value's share of them.
func baselineOf(d *Drift, r *Record) (records float64, shares map[string]float64) {
	records, shares = learnedOf(d, r, func(_ *driftPlace, c *cell) float64 { return c.b })
	for k := range shares {
		shares[k] /= records
	}
	return records, shares
}

// recentOf returns the place's decayed recent records and every value's
// decayed recent count.
func recentOf(d *Drift, r *Record) (records float64, counts map[string]float64) {
	return learnedOf(d, r, func(p *driftPlace, c *cell) float64 { return c.r / p.wr })
}

// mixedRecord is a record of a place with a rare flag, a three-way tier, a
// count by magnitude and a field written on all but 1% of the records.
func mixedRecord(rng *rand.Rand) *Record {
	return outcome(func(m pcommon.Map) {
		m.PutBool("frame.empty", rng.Float64() < 0.03)
		m.PutStr("quality.tier", []string{"hd", "sd", "uhd"}[rng.IntN(3)])
		m.PutInt("frame.count", int64(8+rng.IntN(40)))
		if rng.Float64() >= 0.01 {
			m.PutStr("codec", "h264")
		}
	})
}

func TestDriftSharedHalvesLearnTheWholeStream(t *testing.T) {
	whole, a, b := sharedDrift(48, func() {}), sharedDrift(48, func() {}), sharedDrift(48, func() {})
	rng := rand.New(rand.NewPCG(5, 6))
	var last *Record
	for i := range 6000 {
		last = mixedRecord(rng)
		whole.Check(last, nil, 0)
		if rng.IntN(2) == 0 {
			a.Check(last, nil, 0)
		} else {
			b.Check(last, nil, 0)
		}
		if i%100 == 99 {
			exchange(t, a, b)
		}
	}
	exchange(t, a, b)
	wholeN, wholeShares := baselineOf(whole, last)
	wholeRecent, wholeCounts := recentOf(whole, last)
	for _, half := range []*Drift{a, b} {
		n, shares := baselineOf(half, last)
		// Each half's blocks lag by up to a block, the whole's by one.
		assert.InDelta(t, wholeN, n, 2*blockRecords)
		assert.Len(t, shares, len(wholeShares))
		for k, want := range wholeShares {
			assert.InDelta(t, want, shares[k], 0.01, k)
		}
		// The peer's last hundred records weigh as the latest: close to,
		// not exactly, the whole's window.
		recent, counts := recentOf(half, last)
		assert.InDelta(t, wholeRecent, recent, 0.02*wholeRecent)
		for k, want := range wholeCounts {
			assert.InDelta(t, want, counts[k], 0.05*wholeRecent, k)
		}
	}
	_, dropped := whole.TakeBlocks()
	assert.Zero(t, dropped, "the whole's outbox is bounded, not counted as a failure here")
}

func TestDriftSharedSurgeIsJudgedWhole(t *testing.T) {
	a, b := sharedDrift(200, func() {}), sharedDrift(200, func() {})
	rng := rand.New(rand.NewPCG(9, 10))
	record := func(bad bool) *Record {
		return outcome(func(m pcommon.Map) {
			m.PutBool("frame.empty", bad)
			m.PutStr("quality.tier", []string{"hd", "sd", "uhd"}[rng.IntN(3)])
		})
	}
	for i := range 4000 {
		[]*Drift{a, b}[i%2].Check(record(false), nil, 0)
	}
	exchange(t, a, b)
	// Six failing records among sixty, three on each: fewer than MinCount
	// on either, a surge on both once they share their recent records.
	var notes [2][]Candidate
	for i := range 60 {
		bad := i%20 == 0 || i%20 == 5
		notes[i%2] = []*Drift{a, b}[i%2].Check(record(bad), notes[i%2], 16)
	}
	surging := func(d *Drift, notes []Candidate) (n int) {
		d.Confirm(notes, func(Reason) { n++ })
		return n
	}
	require.Len(t, notes[0], 3)
	assert.Zero(t, surging(a, notes[0]), "three records are no surge")
	before, _ := baselineOf(a, record(false))
	exchange(t, a, b)
	assert.Equal(t, 3, surging(a, notes[0]))
	assert.Equal(t, 3, surging(b, notes[1]))
	after, _ := baselineOf(a, record(false))
	assert.InDelta(t, before, after, 0, "recent records do not join the baseline")
}

func TestDriftSharedRecentBoundsAndRefusals(t *testing.T) {
	d := sharedDrift(48, func() {})
	r := mixedRecord(rand.New(rand.NewPCG(1, 1)))
	for name, b := range map[string]DriftBlock{
		"no stage":         {Records: 1},
		"no records":       {Stage: "st"},
		"too many records": {Stage: "st", Records: maxRecentRecords + 1},
		"count over records": {Stage: "st", Records: 2, Attrs: []BlockAttr{{Name: "flag", Present: 2,
			Values: []BlockValue{{Value: "true", Word: true, Count: 3}}}}},
	} {
		assert.ErrorIs(t, d.MergeRecent(&b), errBlock, name)
	}
	assert.Zero(t, d.places.len())

	// A million records at once leave the window finite, made of them.
	d.Check(r, nil, 0)
	require.NoError(t, d.MergeRecent(&DriftBlock{Service: r.Service, Stage: r.Stage, Records: maxRecentRecords,
		Attrs: []BlockAttr{{Name: "frame.empty", Present: maxRecentRecords, Values: []BlockValue{{Value: "true", Word: true, Count: maxRecentRecords}}}}}))
	n, counts := recentOf(d, r)
	assert.InDelta(t, 400/math.Ln2, n, 1)
	assert.InDelta(t, n, counts["frame.empty=true"], 1e-6)

	// What came from a peer is not sent on; without an outbox nothing is kept.
	recent, _ := d.TakeRecent()
	require.Len(t, recent, 1)
	assert.InDelta(t, 1, recent[0].Records, 0)
	recent, _ = d.TakeRecent()
	assert.Empty(t, recent)
	alone := defaultDrift(func() {})
	alone.Check(r, nil, 0)
	recent, _ = alone.TakeRecent()
	assert.Empty(t, recent)
}

func TestDriftSharedRecentOutboxIsBounded(t *testing.T) {
	d := sharedDrift(48, func() {})
	d.cfg.Outbox = 2
	d.outbox.max = 2
	rng := rand.New(rand.NewPCG(3, 3))
	for _, stage := range []string{"a", "b", "c"} {
		r := mixedRecord(rng)
		r.Stage = stage
		d.Check(r, nil, 0)
	}
	recent, dropped := d.TakeRecent()
	assert.Len(t, recent, 2)
	assert.Equal(t, 1, dropped)
	recent, dropped = d.TakeRecent()
	assert.Empty(t, recent, "the dropped place starts anew")
	assert.Zero(t, dropped)
}

func TestDriftSharedWarmUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	first := mixedRecord(rng)
	judged := func(d *Drift) bool {
		n, _ := baselineOf(d, first)
		return n >= 48
	}
	alone, a, b := sharedDrift(48, func() {}), sharedDrift(48, func() {}), sharedDrift(48, func() {})
	for range 24 {
		for _, d := range []*Drift{alone, a, b} {
			d.Check(mixedRecord(rng), nil, 0)
		}
	}
	exchange(t, a, b)
	assert.False(t, judged(alone), "24 records of its own are too few")
	assert.True(t, judged(a), "24 records of its own and 24 of its peer's are a baseline")
	assert.True(t, judged(b))
}

func TestDriftSharedBoundsAndRefusals(t *testing.T) {
	evicted := 0
	d := sharedDrift(48, func() { evicted++ })
	valid := func() DriftBlock {
		return DriftBlock{Service: "s", Stage: "st", Records: 100, Attrs: []BlockAttr{
			{Name: "flag", Present: 100, Values: []BlockValue{{Value: "true", Word: true, Count: 3}, {Value: "4..7", Order: 4, Count: 97}}},
		}}
	}
	for name, spoil := range map[string]func(*DriftBlock){
		"no place":           func(b *DriftBlock) { b.Stage, b.Service = "", "" },
		"too many records":   func(b *DriftBlock) { b.Records = blockRecords + 1 },
		"no records":         func(b *DriftBlock) { b.Records = 0 },
		"NaN records":        func(b *DriftBlock) { b.Records = math.NaN() },
		"negative count":     func(b *DriftBlock) { b.Attrs[0].Values[0].Count = -1 },
		"count over records": func(b *DriftBlock) { b.Attrs[0].Present = 101 },
		"absurd order":       func(b *DriftBlock) { b.Attrs[0].Values[1].Order = 1 << 40 },
		"dimension values":   func(b *DriftBlock) { b.Attrs[0].Dimension = true },
		"long value":         func(b *DriftBlock) { b.Attrs[0].Values[0].Value = string(make([]byte, maxValueLen+1)) },
		"no name":            func(b *DriftBlock) { b.Attrs[0].Name = "" },
	} {
		b := valid()
		spoil(&b)
		assert.ErrorIs(t, d.MergeBlock(&b), errBlock, name)
		if name != "too many records" { // for a block, not for a push interval
			assert.ErrorIs(t, d.MergeRecent(&b), errBlock, name)
		}
	}
	assert.Zero(t, d.places.len(), "a refused block adds nothing")

	// Places, attributes and values stay within the receiver's bounds.
	for i := range 100 {
		b := valid()
		b.Stage = string(rune('a'+i%26)) + string(rune('a'+i/26))
		for k := range 20 {
			b.Attrs = append(b.Attrs, BlockAttr{Name: string(rune('A' + k)), Present: 1})
		}
		require.NoError(t, d.MergeBlock(&b))
	}
	assert.LessOrEqual(t, d.places.len(), 64)
	assert.Equal(t, 100, d.places.len()+evicted, "every place evicted is counted")
	sh, p := d.places.acquire(placeKey{service: "s", stage: "vd"}, newDriftPlace) // the last one merged
	defer sh.mu.Unlock()
	assert.Len(t, p.list, 8)
	assert.InDelta(t, 100, p.n.b, 1e-9)
}

func TestDriftSharedNativeValuesCountThePeersRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	alone, a, b := sharedDrift(48, func() {}), sharedDrift(48, func() {}), sharedDrift(48, func() {})
	for range 72 {
		for _, d := range []*Drift{alone, a, b} {
			d.Check(mixedRecord(rng), nil, 0)
		}
	}
	exchange(t, a, b)
	native := func(d *Drift) bool {
		r := outcome(func(m pcommon.Map) { m.PutStr("quality.tier", "lowres") })
		d.Check(r, nil, 0)
		sh, p := d.places.acquire(placeKey{service: r.Service, stage: r.Stage}, newDriftPlace)
		defer sh.mu.Unlock()
		return p.attrs["quality.tier"].value([]byte("lowres")).native
	}
	assert.True(t, native(alone), "within the first 128 records it saw")
	assert.False(t, native(a), "after the 144 records it and its peer saw")
}
