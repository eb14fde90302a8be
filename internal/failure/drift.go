package failure

import (
	"math"
	"math/bits"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loom-otel/loom/internal/extract"
	"github.com/loom-otel/loom/internal/golden"
)

// DriftConfig configures the value-drift detector.
type DriftConfig struct {
	// RareShare: a value is rare when it is under this share of its place's
	// baseline records, e.g. 0.05.
	RareShare float64
	// SurgeRatio: a rare value surges when its share of the place's recent
	// records is at least this many times its baseline share, e.g. 4.
	SurgeRatio float64
	// MinCount is the decayed number of recent records that must carry a
	// surging value, e.g. 4.
	MinCount float64
	// BaselineRecords and RecentRecords are the half-lives, in records of the
	// place, of the baseline's memory and of the recent window's.
	BaselineRecords, RecentRecords float64
	// MinBaseline is the decayed number of records a place needs before its
	// values are judged.
	MinBaseline float64
	// MaxPlaces bounds the places tracked, MaxAttributes the attributes per
	// place, MaxValues the values per attribute (an attribute with more is an
	// identifier or a measurement, not an outcome, and only its presence is
	// tracked).
	MaxPlaces, MaxAttributes, MaxValues int
	// Outbox bounds the blocks kept for peers between two TakeBlocks, and
	// the places TakeRecent returns; 0 keeps none: nothing is shared.
	Outbox int
}

// Drift finds silent failures in outcome attributes: per place (service,
// stage, spans and logs apart; a service's records without a stage are a
// place of their own) it learns the share of every value of the
// low-cardinality attributes — booleans, words, numbers by order of
// magnitude with zero apart — among the records that carry the attribute,
// and the share of every shape (the set of attributes a record carries). A
// record whose value is rare in the baseline and surging in the recent
// records, or whose shape lacks fields that a common shape carries, is
// evidence that its request failed: a flag that turns true, a grade that
// turns bad, a count that drops to zero or jumps, a field that a kind of line
// stops writing.
//
// Strings with digits that are not numbers (ids, versions, hosts, templates)
// are dimensions, not outcomes: what a root cause is named by, never evidence
// of a failure.
//
// The baseline lags: a place's records are counted in a block of
// blockRecords and the block joins the baseline when it is full, so a surge
// is judged against the traffic before it. Until the place settles (admit,
// settle: its blocks agree with the baseline and it holds MinBaseline
// records), blocks join every quarter of MinBaseline: a place that is a
// small share of the traffic (or of one gateway's) has a baseline before an
// early incident fills it, and gateways that share their blocks (TakeBlocks,
// MergeBlock) warm it up together.
// Rare values on the rise when their block joins enter the baseline at a
// sixteenth of their weight, so that a failing minority stays abnormal while
// it lasts, until its share has held for absorbRecords records; a change that
// takes over most of a place is its new normal at once.
//
// Check runs as records arrive and notes their rare values; Confirm judges
// the notes when the request is decided, by which time a surge that began
// with this request is visible.
type Drift struct {
	cfg    DriftConfig
	places *shardedLRU[*driftPlace]
	// gr is the per-record growth of the recent window's weight: its counts
	// decay by growing the weight of new records.
	gr float64
	// warmupBlock is the size of the blocks that join a baseline under MinBaseline.
	warmupBlock float64
	// absorbRecords is how many records (of what it is a share of) a rising
	// value's new share must hold for before it is the place's normal.
	absorbRecords float64
	outbox        *outbox
}

// blockRecords is how many records of a place join its baseline at once.
const blockRecords = 128

// risingEvidence is how many records of a value at the rare bound a baseline
// must hold before a native value near the bound may rise.
const risingEvidence = 25

type driftPlace struct {
	key placeKey
	// wr is the recent weight of the next record; n counts the place's records.
	wr    float64
	n     cell
	attrs map[string]*driftAttr
	list  []*driftAttr
	// own counts the instance's own records, of which shapes are shares:
	// peers share values, not shapes (an attribute's bit is this place's).
	own    cell
	shapes []*driftValue
	// manyShapes: the place writes more kinds of record than maxShapes, and
	// which fields a record lacks is not judged.
	manyShapes bool
	seq        uint64 // records seen
	// peerRecords counts the records of the place that peers saw, as their
	// recent records tell (MergeRecent): with seq, the records seen by all.
	peerRecords float64
	// settled: the baseline is representative and the place is judged;
	// agreeing counts the blocks in a row that agreed with it before.
	settled  bool
	agreeing int
}

// cell counts records: b in the baseline (decayed), r in the recent window
// (scaled by the place's wr), block in the block waiting to join the
// baseline, fresh the instance's own since the last TakeRecent.
type cell struct{ b, r, block, fresh float64 }

func (c *cell) add(wr float64) {
	c.r += wr
	c.block++
	c.fresh++
}

// join adds the block to the baseline with the given weight and returns
// what it added.
func (c *cell) join(decay, weight float64) float64 {
	joined := c.block * weight
	c.b = c.b*decay + joined
	c.block = 0
	return joined
}

type driftAttr struct {
	name    string
	present cell
	// bit marks the attribute in its records' shapes (0 beyond the
	// place's 64th attribute).
	bit    uint64
	values []*driftValue
	// dimension marks an attribute whose values are not tracked: an
	// identifier, a version, a measurement with too many values.
	dimension bool
}

type driftValue struct {
	value string
	c     cell
	// order ranks a number's magnitude (0 for zero, higher for larger
	// magnitudes); noOrder for words, booleans and absence.
	order int
	// native marks a value seen in the place's first blockRecords records:
	// part of its mix from the start, as far as a thin baseline can tell.
	native bool
	// mask is a shape's set of attributes; lacking marks a shape that first
	// appeared when a settled baseline held a common shape with more fields:
	// a kind of line lost some. A new kind of line comes with all of its
	// shapes at once, and none of them lacks anything.
	mask    uint64
	lacking bool
	// held is the (decayed) weight that rising blocks kept out of the
	// baseline, and streak the records it is a share of since it began to rise:
	// a value that keeps its new share long enough is given its weight back.
	held, streak float64
}

const noOrder = math.MinInt

// Candidate is a rare value a record carried, to be judged when its request is.
type Candidate struct {
	place *driftPlace
	attr  *driftAttr
	value *driftValue
}

// rescaleAt bounds the growing weights before they lose precision.
const rescaleAt = 1e100

// NewDrift returns the detector; evicted is called for every place evicted.
func NewDrift(cfg DriftConfig, evicted func()) *Drift {
	d := &Drift{
		cfg:         cfg,
		places:      newShardedLRU[*driftPlace](cfg.MaxPlaces, evicted),
		gr:          math.Exp2(1 / cfg.RecentRecords),
		warmupBlock: max(1, math.Ceil(cfg.MinBaseline/warmupBlocks)),
		// Half the baseline's half-life: longer than an incident is
		// usually left running, short enough that a steady change does
		// not stay an incident for good.
		absorbRecords: cfg.BaselineRecords / 2,
	}
	if cfg.Outbox > 0 {
		d.outbox = &outbox{max: cfg.Outbox}
	}
	return d
}

// warmupBlocks is how many blocks a baseline takes to reach MinBaseline.
const warmupBlocks = 4

// Check learns r's outcome attributes and appends the rare values it carries
// to notes, at most maxNotes of them in all; it returns notes.
func (d *Drift) Check(r *Record, notes []Candidate, maxNotes int) []Candidate {
	key := placeKey{service: r.Service, stage: r.Stage, span: r.IsSpan}
	if key.stage == "" && key.service == "" {
		return notes
	}
	sh, p := d.places.acquire(key, newDriftPlace)
	defer sh.mu.Unlock()
	return d.observe(p, r.Attrs, notes, maxNotes)
}

func newDriftPlace(key placeKey) *driftPlace {
	return &driftPlace{key: key, wr: 1, attrs: map[string]*driftAttr{}}
}

func (d *Drift) observe(p *driftPlace, attrs pcommon.Map, notes []Candidate, maxNotes int) []Candidate {
	p.seq++
	judged := p.settled
	var buf [24]byte
	var mask uint64
	for k, v := range attrs.All() {
		if skipAttribute(k) {
			continue
		}
		a := d.attr(p, k)
		if a == nil {
			continue
		}
		a.present.add(p.wr)
		mask |= a.bit
		if a.dimension {
			continue
		}
		if isList(v) {
			notes = d.observeList(p, a, v, judged, notes, maxNotes)
			continue
		}
		value, order, ok := outcomeValue(v, buf[:0])
		if !ok {
			a.dimension = true
			a.values = nil
			continue
		}
		dv := d.value(p, a, value, order, false)
		if dv == nil {
			continue
		}
		notes = d.count(p, a, dv, judged, notes, maxNotes)
	}
	notes = d.countShape(p, mask, judged, notes, maxNotes)
	p.n.add(p.wr)
	p.own.add(p.wr)
	p.advance(d.gr)
	if p.seq%blockRecords == 0 || d.warmingUp(p) && p.n.block >= d.warmupBlock {
		d.joinBlock(p)
	}
	return notes
}

// observeList counts every element of a list-valued attribute as one of its
// values: the list is a multiset, and an element that is rare among the
// records carrying the attribute is noted as a value would be.
func (d *Drift) observeList(p *driftPlace, a *driftAttr, v pcommon.Value, judged bool, notes []Candidate, maxNotes int) []Candidate {
	var buf [24]byte
	ok := eachElement(v, func(s string) bool {
		value, order, ok := outcomeString(s, buf[:0])
		if !ok {
			return false
		}
		if dv := d.value(p, a, value, order, false); dv != nil {
			notes = d.count(p, a, dv, judged, notes, maxNotes)
		}
		return !a.dimension
	})
	if !ok {
		a.dimension, a.values = true, nil
	}
	return notes
}

// maxListText bounds the JSON arrays written as text that are read as lists.
const maxListText = 512

// isList says whether v is a list: a slice, or a JSON array of strings
// written as text (goldenfield keeps a log body's arrays so).
func isList(v pcommon.Value) bool {
	switch v.Type() {
	case pcommon.ValueTypeSlice:
		return true
	case pcommon.ValueTypeStr:
		s := v.Str()
		return len(s) >= 2 && len(s) <= maxListText && s[0] == '[' && s[len(s)-1] == ']'
	}
	return false
}

// eachElement calls fn with the text of every element of a list (isList)
// until fn returns false; ok is false when an element is not a scalar.
func eachElement(v pcommon.Value, fn func(string) bool) (ok bool) {
	if v.Type() == pcommon.ValueTypeSlice {
		for i := 0; i < v.Slice().Len(); i++ {
			e := v.Slice().At(i)
			switch e.Type() {
			case pcommon.ValueTypeMap, pcommon.ValueTypeSlice, pcommon.ValueTypeBytes:
				return false
			}
			if !fn(e.AsString()) {
				return false
			}
		}
		return true
	}
	inner := strings.TrimSpace(v.Str()[1 : len(v.Str())-1])
	if inner == "" {
		return true
	}
	for part := range strings.SplitSeq(inner, ",") {
		part = strings.TrimSpace(part)
		if len(part) >= 2 && part[0] == '"' && part[len(part)-1] == '"' {
			part = part[1 : len(part)-1]
		}
		if strings.ContainsAny(part, `"[]{}`) || !fn(part) {
			return false
		}
	}
	return true
}

// attr returns the place's attribute k, added when new; nil when the place
// tracks MaxAttributes already.
func (d *Drift) attr(p *driftPlace, k string) *driftAttr {
	a := p.attrs[k]
	if a == nil {
		if len(p.list) >= d.cfg.MaxAttributes {
			return nil
		}
		a = &driftAttr{name: strings.Clone(k)}
		if len(p.list) < 64 {
			a.bit = 1 << len(p.list)
		}
		p.attrs[a.name] = a
		p.list = append(p.list, a)
	}
	return a
}

// value returns the attribute's value, added when new; nil when it has
// MaxValues already, which makes it a dimension.
func (d *Drift) value(p *driftPlace, a *driftAttr, value []byte, order int, native bool) *driftValue {
	if dv := a.value(value); dv != nil {
		return dv
	}
	if len(a.values) >= d.cfg.MaxValues {
		a.dimension = true
		a.values = nil
		return nil
	}
	dv := &driftValue{value: string(value), order: order, native: native || float64(p.seq)+p.peerRecords <= blockRecords}
	a.values = append(a.values, dv)
	return dv
}

// warmingUp says whether the place's baseline is not yet representative.
func (d *Drift) warmingUp(p *driftPlace) bool {
	return !p.settled
}

// decay is what the place's baseline keeps of its counts when a block of
// records joins it. A baseline that is warming up forgets nothing: its
// first MinBaseline records all count toward judging the place, and they
// are too few for their age to matter.
func (d *Drift) decay(p *driftPlace, records float64) float64 {
	if d.warmingUp(p) {
		return 1
	}
	return math.Exp2(-records / d.cfg.BaselineRecords)
}

// of is the cell dv's shares are taken of: the records that carried the
// attribute for a value (so that an optional attribute's values are judged
// among the lines that write it), the instance's own records for a shape
// (a nil attribute).
func (p *driftPlace) of(a *driftAttr, _ *driftValue) *cell {
	if a == nil {
		return &p.own
	}
	return &a.present
}

// countShape counts a record of the given shape, noting it when the shape is
// rare and lacks fields that the records carrying its fields usually carry
// (usualLacking): a field that stopped being written. A place that writes
// several kinds of line has several common shapes, and a line is judged
// against the kinds it could be (those that carry every field it carries).
func (d *Drift) countShape(p *driftPlace, mask uint64, judged bool, notes []Candidate, maxNotes int) []Candidate {
	if p.manyShapes {
		return notes
	}
	sh := p.shape(mask)
	if sh == nil {
		if len(p.shapes) >= maxShapes {
			p.manyShapes, p.shapes = true, nil
			return notes
		}
		sh = &driftValue{value: Absent, order: noOrder, mask: mask}
		sh.lacking = judged && d.usualLacking(p, sh) != 0
		p.shapes = append(p.shapes, sh)
	}
	if judged && sh.lacking && len(notes) < maxNotes && d.rare(p, nil, sh) && d.usualLacking(p, sh) != 0 {
		notes = append(notes, Candidate{place: p, value: sh})
	}
	sh.c.add(p.wr)
	return notes
}

// maxShapes bounds the shapes of a place: optional fields multiply them.
const maxShapes = 64

func (p *driftPlace) shape(mask uint64) *driftValue {
	for _, sh := range p.shapes {
		if sh.mask == mask {
			return sh
		}
	}
	return nil
}

// usualLacking is the set of fields that sh lacks and that the baseline's
// records carrying every field of sh almost always carry (all but a rare
// share): fields a kind of line stopped writing. A field that is optional
// there (a combination of optional fields, a field being rolled out, the
// fields of another kind of line) is not lacking.
func (d *Drift) usualLacking(p *driftPlace, sh *driftValue) uint64 {
	var carrying float64
	var with [64]float64
	for _, s := range p.shapes {
		if s.mask&sh.mask != sh.mask {
			continue
		}
		carrying += s.c.b
		for more := s.mask &^ sh.mask; more != 0; more &= more - 1 {
			with[bits.TrailingZeros64(more)] += s.c.b
		}
	}
	if carrying < max(d.cfg.MinBaseline, 1) {
		return 0
	}
	var lacking uint64
	for i, n := range with {
		if n >= (1-d.cfg.RareShare)*carrying {
			lacking |= 1 << i
		}
	}
	return lacking
}

// missing names the fields of the set.
func (p *driftPlace) missing(set uint64) string {
	var names []string
	for _, a := range p.list {
		if a.bit&set != 0 {
			names = append(names, a.name)
		}
	}
	return extract.TruncateUTF8(strings.Join(names, ","), 128)
}

// established says whether dv's share can be judged: the baseline holds
// MinBaseline records of what it is a share of. The values of an attribute
// that a deploy began to write are not rare: they are new, and join the
// baseline as they come.
func (d *Drift) established(p *driftPlace, a *driftAttr, dv *driftValue) bool {
	return p.settled && p.of(a, dv).b >= max(d.cfg.MinBaseline, 1)
}

// rare says whether dv is under the rare share of its baseline.
func (d *Drift) rare(p *driftPlace, a *driftAttr, dv *driftValue) bool {
	return d.established(p, a, dv) && dv.c.b < d.cfg.RareShare*p.of(a, dv).b
}

// count adds one record carrying dv, noting it when it is rare and, for a
// number, an outcome's kind of change.
func (d *Drift) count(p *driftPlace, a *driftAttr, dv *driftValue, judged bool, notes []Candidate, maxNotes int) []Candidate {
	if judged && d.rare(p, a, dv) && len(notes) < maxNotes && d.outcomeChange(p, a, dv) {
		notes = append(notes, Candidate{place: p, attr: a, value: dv})
	}
	dv.c.add(p.wr)
	return notes
}

// outcomeChange says whether a rare number is a change an outcome shows: a
// count that drops to zero, or a magnitude above every common one (not rare)
// of the baseline. A rare magnitude below or among them is the traffic's mix
// (a family of short prompts), not a failure. A fraction (a score, a
// probability) is a change when its tenth is outside the common tenths on
// either side: a quality that drops is an outcome.
func (d *Drift) outcomeChange(p *driftPlace, a *driftAttr, dv *driftValue) bool {
	if dv.order == noOrder || dv.order == 0 {
		return true
	}
	common := d.cfg.RareShare * a.present.b
	if t, ok := tenthOf(dv.value); ok {
		lo, hi := 10, -1
		for _, v := range a.values {
			if tv, ok := tenthOf(v.value); ok && v != dv && v.c.b >= common {
				lo, hi = min(lo, tv), max(hi, tv)
			}
		}
		if hi >= 0 {
			return t < lo || t > hi
		}
	}
	for _, v := range a.values {
		if v != dv && v.order != noOrder && v.order >= dv.order && v.c.b >= common {
			return false
		}
	}
	return true
}

// joinBlock adds the place's last block of records to its baseline (rare
// values on the rise through joinValue), and settles a baseline that is not
// yet representative.
// When the baselines are shared, the block is put in the outbox as it
// joined, for the peers.
func (d *Drift) joinBlock(p *driftPlace) {
	records := p.n.block
	if !p.settled {
		d.admit(p, p.ownBlock())
	}
	decay := d.decay(p, records)
	var blk *DriftBlock
	if d.outbox != nil {
		blk = &DriftBlock{Service: p.key.service, Stage: p.key.stage, Span: p.key.span, Records: records,
			Attrs: make([]BlockAttr, 0, len(p.list))}
	}
	for _, a := range p.list {
		// Values are judged against the baseline before their block joins it.
		ba := BlockAttr{Name: a.name, Dimension: a.dimension}
		for _, v := range a.values {
			if joined := d.joinValue(p, a, v, decay); joined > 0 && blk != nil {
				ba.Values = append(ba.Values, blockValue(v, joined))
			}
		}
		ba.Present = a.present.join(decay, 1)
		ba.Absent = records - ba.Present
		if blk != nil {
			blk.Attrs = append(blk.Attrs, ba)
		}
	}
	for _, sh := range p.shapes {
		d.joinValue(p, nil, sh, decay)
	}
	p.own.join(decay, 1)
	p.n.join(decay, 1)
	d.settle(p)
	if blk != nil {
		d.outbox.put(blk)
	}
}

// risingWeight is the weight a block's records of a rising value join the
// baseline with.
const risingWeight = 1.0 / 16

// joinValue adds dv's block to the baseline and returns what it added. A
// rare value on the rise joins at risingWeight, so that a failing minority
// stays abnormal while it lasts; the rest is held, and the surge stays open
// while the value's recent share is at least twice its baseline share (a
// block where the rise is not significant does not end it). A value that
// keeps its surge open for absorbRecords records has held its new share: it
// is given the held weight back, and is the place's new normal. When a surge
// closes, the value gets the held weight back if its recent share is at
// least half of what the baseline with the held weight says (chance lifted a
// stationary value, which must not lose weight for good), and loses it when
// it fell further (the surge ended).
func (d *Drift) joinValue(p *driftPlace, a *driftAttr, dv *driftValue, decay float64) float64 {
	of := p.of(a, dv)
	if !d.rising(p, a, dv) && (dv.held == 0 || !d.elevated(p, a, dv)) {
		if dv.held > 0 && of.r > 0 && dv.c.r/of.r >= 0.5*(dv.c.b+dv.held)/of.b {
			dv.c.b += dv.held
		}
		dv.held, dv.streak = 0, 0
		return dv.c.join(decay, 1)
	}
	dv.streak += of.block
	if dv.streak >= d.absorbRecords {
		dv.c.b += dv.held
		dv.held, dv.streak = 0, 0
		return dv.c.join(decay, 1)
	}
	dv.held = dv.held*decay + dv.c.block*(1-risingWeight)
	return dv.c.join(decay, risingWeight)
}

// elevated says whether the value's recent share is at least twice its
// baseline share: an open surge goes on.
func (d *Drift) elevated(p *driftPlace, a *driftAttr, dv *driftValue) bool {
	of := p.of(a, dv)
	return dv.c.r/p.wr >= 2*max(dv.c.b/of.b, 0.5/of.b)*of.r/p.wr
}

// settleBlocks is how many blocks in a row must agree with a baseline
// before it is taken as representative.
const settleBlocks = 3

// admit compares a block of the place's records (its own or a peer's),
// while the place is not settled, with the baseline it is about to join: a
// block that disagrees replaces the baseline. A place's first records are
// often not its mix (at full rate, every request's first line comes before
// any request's last one; a field rolls out), and a baseline learned from
// them would judge the mix itself as drift.
func (d *Drift) admit(p *driftPlace, b *DriftBlock) {
	if !d.agrees(p, b) {
		p.decayBaseline(0)
		p.agreeing = 0
	}
}

// settle counts a block that joined an unsettled baseline: the place is
// judged once settleBlocks blocks in a row agreed with what came before
// them, and the baseline holds MinBaseline records (at least one).
func (d *Drift) settle(p *driftPlace) {
	if p.settled {
		return
	}
	p.agreeing++
	p.settled = p.agreeing >= settleBlocks && p.n.b >= max(d.cfg.MinBaseline, 1)
}

// agrees says whether the block's shares (every attribute's presence, every
// tracked value's) are those of the baseline, within chance.
func (d *Drift) agrees(p *driftPlace, b *DriftBlock) bool {
	if p.n.b == 0 || b.Records == 0 {
		return true
	}
	inBlock := make(map[string]*BlockAttr, len(b.Attrs))
	for i := range b.Attrs {
		inBlock[b.Attrs[i].Name] = &b.Attrs[i]
	}
	differs := func(k, baseline float64) bool { return sharesDiffer(k, b.Records, baseline, p.n.b) }
	for _, a := range p.list {
		ba := inBlock[a.name]
		if ba == nil {
			ba = &BlockAttr{}
		}
		delete(inBlock, a.name)
		if differs(ba.Present, a.present.b) {
			return false
		}
		for _, v := range a.values {
			if differs(ba.count(v.value), v.c.b) {
				return false
			}
		}
	}
	for _, ba := range inBlock {
		if differs(ba.Present, 0) {
			return false
		}
	}
	return true
}

// sharesDiffer says whether k of n records and K of N are different shares:
// apart by more than a tenth, and by more than four standard errors of a
// two-proportion test (a block is small, and many shares are compared).
func sharesDiffer(k, n, kk, nn float64) bool {
	diff := math.Abs(k/n - kk/nn)
	pooled := (k + kk) / (n + nn)
	return diff > 0.1 && diff > 4*math.Sqrt(pooled*(1-pooled)*(1/n+1/nn))
}

// ownBlock is the place's block of records waiting to join, as a peer's
// would arrive.
func (p *driftPlace) ownBlock() *DriftBlock {
	b := &DriftBlock{Records: p.n.block, Attrs: make([]BlockAttr, 0, len(p.list))}
	for _, a := range p.list {
		ba := BlockAttr{Name: a.name, Present: a.present.block}
		for _, v := range a.values {
			if v.c.block > 0 {
				ba.Values = append(ba.Values, BlockValue{Value: v.value, Count: v.c.block})
			}
		}
		b.Attrs = append(b.Attrs, ba)
	}
	return b
}

// count is the block's count of value.
func (ba *BlockAttr) count(value string) float64 {
	for _, v := range ba.Values {
		if v.Value == value {
			return v.Count
		}
	}
	return 0
}

// rising says whether a rare value's recent share is at least three times its
// baseline share: a surge may be starting, and its records must not become
// the baseline it is judged against before it is visible. A native value in
// a baseline that does not yet hold risingEvidence records of a value at the
// rare bound rises only when its recent share is well above the bound: a
// thin baseline undercounts a common minority by chance often enough that
// discounting it would lower its baseline further, feed itself, and pin a
// stationary value as surging for good. Once it holds them, chance lifts a
// stationary rare value to three times its share now and then, which biases
// its baseline little. Of the shapes, only those that lack fields rise: the
// others are kinds of line, which join at their weight.
func (d *Drift) rising(p *driftPlace, a *driftAttr, dv *driftValue) bool {
	if a == nil && !dv.lacking || !d.rare(p, a, dv) {
		return false
	}
	of := p.of(a, dv)
	recent, n := dv.c.r/p.wr, of.r/p.wr
	if dv.native && of.b*d.cfg.RareShare < risingEvidence && recent < 2*d.cfg.RareShare*n {
		return false
	}
	return recent >= 3 && recent >= 3*max(dv.c.b/of.b, 0.5/of.b)*n
}

// surging says whether a rare value's recent share is SurgeRatio times its
// baseline share and, beyond chance, above what the baseline predicts.
func (d *Drift) surging(p *driftPlace, a *driftAttr, dv *driftValue) bool {
	if !d.established(p, a, dv) {
		return false
	}
	of := p.of(a, dv)
	baseShare := max(dv.c.b/of.b, 0.5/of.b)
	if baseShare >= d.cfg.RareShare {
		return false
	}
	recent, n := dv.c.r/p.wr, of.r/p.wr
	expected := baseShare * n
	return recent >= d.cfg.MinCount && recent >= d.cfg.SurgeRatio*expected && recent >= expected+4*math.Sqrt(expected)
}

// Confirm judges the notes of a request: a reason for each rare value that
// surges now.
func (d *Drift) Confirm(notes []Candidate, add func(Reason)) {
	for _, c := range notes {
		var reason Reason
		var surging bool
		d.places.lock(c.place.key, func() {
			if surging = d.surging(c.place, c.attr, c.value); !surging {
				return
			}
			of := c.place.of(c.attr, c.value)
			reason = Reason{Kind: KindValueDrift, Service: c.place.key.service, Stage: c.place.key.stage,
				Value: c.value.value, Baseline: c.value.c.b / of.b, Current: c.value.c.r / of.r}
			if c.attr != nil {
				reason.Attribute = c.attr.name
			} else if lacking := d.usualLacking(c.place, c.value); lacking != 0 {
				reason.Attribute = c.place.missing(lacking)
			} else {
				surging = false // what it lacked is no longer usual
			}
		})
		if surging {
			add(reason)
		}
	}
}

// advance grows the weight of the place's next record by growth: the
// recent window decays.
func (p *driftPlace) advance(growth float64) {
	p.wr *= growth
	if p.wr > rescaleAt {
		p.rescale()
	}
}

func (p *driftPlace) rescale() {
	fr := 1 / p.wr
	scale := func(c *cell) { c.r *= fr }
	scale(&p.n)
	scale(&p.own)
	for _, a := range p.list {
		scale(&a.present)
		for _, v := range a.values {
			scale(&v.c)
		}
	}
	for _, sh := range p.shapes {
		scale(&sh.c)
	}
	p.wr = 1
}

// tenthOf reads the tenth of a fraction's label ("0.3..0.4" is 3).
func tenthOf(label string) (int, bool) {
	if len(label) == 8 && label[0] == '0' && label[1] == '.' && label[2] >= '0' && label[2] <= '9' && label[3] == '.' {
		return int(label[2] - '0'), true
	}
	return 0, false
}

func (a *driftAttr) value(v []byte) *driftValue {
	for _, dv := range a.values {
		if dv.value == string(v) {
			return dv
		}
	}
	return nil
}

// skipAttribute leaves out the attributes that identify a request or that
// Loom itself writes (validation, sampling, verdict, stitching, identity):
// they are never outcomes of the service, and some depend on timing.
func skipAttribute(k string) bool {
	switch k {
	case golden.ReqID, golden.InputHash, golden.ModelVer, golden.Stage, golden.TraceID, golden.SpanID:
		return true
	case golden.LatencyMs: // the latency detector's evidence, judged against its place's quantile
		return true
	}
	return golden.IsLoomAttr(k)
}

// maxOutcomeLen bounds the strings taken for outcome values: longer ones are text.
const maxOutcomeLen = 32

// outcomeValue is the value's class as an outcome: "true"/"false", a word,
// or a number's order of magnitude ("0", "1", "2..3", "4..7", …) with its
// rank (noOrder for the others). ok is false for what is not an outcome: strings with digits that are
// not numbers, long text, maps, lists (observeList reads those), bytes.
func outcomeValue(v pcommon.Value, buf []byte) ([]byte, int, bool) {
	switch v.Type() {
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(buf, v.Bool()), noOrder, true
	case pcommon.ValueTypeInt:
		b, order := magnitude(buf, float64(v.Int()))
		return b, order, true
	case pcommon.ValueTypeDouble:
		b, order := magnitude(buf, v.Double())
		return b, order, true
	case pcommon.ValueTypeStr:
		return outcomeString(v.Str(), buf)
	}
	return nil, noOrder, false
}

// outcomeString is outcomeValue of a string.
func outcomeString(s string, buf []byte) ([]byte, int, bool) {
	if len(s) == 0 || len(s) > maxOutcomeLen {
		return nil, noOrder, false
	}
	switch digits, numeric := scanNumber(s); {
	case !digits:
		return append(buf, s...), noOrder, true
	case numeric:
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			b, order := magnitude(buf, f)
			return b, order, true
		}
	}
	return nil, noOrder, false
}

// scanNumber says whether s has digits, and whether it is made of nothing
// but a number's characters (so that ParseFloat, whose errors allocate, runs
// only on what may be a number).
func scanNumber(s string) (digits, numeric bool) {
	numeric = true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E':
		default:
			numeric = false
		}
	}
	return digits, numeric && digits
}

// magnitude writes the power-of-two range holding f: "0", "1", "2..3",
// "4..7", and the same negated; a fraction in its tenth ("0.3..0.4", the
// last "0.9..1.0"), a negative one as "-0..1"; order ranks it: 0 for zero,
// 1 for fractions, 2+k for [2^k, 2^(k+1)), negative for negative numbers.
func magnitude(buf []byte, f float64) ([]byte, int) {
	sign := 1
	switch {
	case f == 0 || math.IsNaN(f):
		return append(buf, '0'), 0
	case f < 0:
		buf = append(buf, '-')
		f, sign = -f, -1
	}
	if f < 1 {
		if sign > 0 { // a score, a probability, a ratio: in tenths
			tenth := byte(min(9, int(f*10)))
			if tenth == 9 {
				return append(buf, "0.9..1.0"...), 1
			}
			return append(buf, '0', '.', '0'+tenth, '.', '.', '0', '.', '1'+tenth), 1
		}
		return append(buf, "0..1"...), sign
	}
	if math.IsInf(f, 0) || f >= 1<<62 {
		return append(buf, "huge"...), sign * 66
	}
	k := int(math.Floor(math.Log2(f)))
	lo := uint64(1) << uint(k)
	if lo == 1 {
		return append(buf, '1'), sign * 2
	}
	buf = strconv.AppendUint(buf, lo, 10)
	buf = append(buf, ".."...)
	return strconv.AppendUint(buf, 2*lo-1, 10), sign * (2 + k)
}
