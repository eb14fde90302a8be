package failure

import (
	"math"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"

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
// stage, spans and logs apart) it learns the share of every value of the
// low-cardinality attributes — booleans, words, numbers by order of
// magnitude with zero apart — and how often each usual attribute is absent.
// A record whose value (or absence) is rare in the baseline and surging in
// the recent records is evidence that its request failed: a flag that turns
// true, a grade that turns bad, a count that drops to zero or jumps, a field
// that stops being written.
//
// Strings with digits that are not numbers (ids, versions, hosts, templates)
// are dimensions, not outcomes: what a root cause is named by, never evidence
// of a failure.
//
// The baseline lags: a place's records are counted in a block of
// blockRecords and the block joins the baseline when it is full, so a surge
// is judged against the traffic before it. Until the baseline holds
// MinBaseline records, blocks join every quarter of that: a place that is a
// small share of the traffic (or of one gateway's) has a baseline before an
// early incident fills it, and gateways that share their blocks (TakeBlocks,
// MergeBlock) warm it up together.
// Rare values on the rise when their block joins enter the baseline at a
// sixteenth of their weight, so that a failing minority stays abnormal while
// it lasts, and a change that takes over most of a place becomes its new
// normal.
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
	outbox      *outbox
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
	usual []*driftAttr // attributes (almost) always present: their absence is judged
	seq   uint64       // records seen, which stamps the attributes each carried
	// peerRecords counts the records of the place that peers saw, as their
	// recent records tell (MergeRecent): with seq, the records seen by all.
	peerRecords float64
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
	seen    uint64 // seq of the last record that carried it
	present cell
	absent  *driftValue // tracked while the attribute is usual
	values  []*driftValue
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
	if key.stage == "" {
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
	judged := p.n.b >= d.cfg.MinBaseline
	var buf [24]byte
	for k, v := range attrs.All() {
		if skipAttribute(k) {
			continue
		}
		a := d.attr(p, k)
		if a == nil {
			continue
		}
		a.seen = p.seq
		a.present.add(p.wr)
		if a.dimension {
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
	for _, a := range p.usual {
		if a.seen != p.seq {
			notes = d.count(p, a, a.absent, judged, notes, maxNotes)
		}
	}
	p.n.add(p.wr)
	p.advance(d.gr)
	if p.seq%blockRecords == 0 || d.warmingUp(p) && p.n.block >= d.warmupBlock {
		d.joinBlock(p)
	}
	return notes
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

// warmingUp says whether the place's baseline is still under MinBaseline
// records (at least one).
func (d *Drift) warmingUp(p *driftPlace) bool {
	return p.n.b < max(d.cfg.MinBaseline, 1)
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

// count adds one record carrying dv, noting it when it is rare and, for a
// number, an outcome's kind of change.
func (d *Drift) count(p *driftPlace, a *driftAttr, dv *driftValue, judged bool, notes []Candidate, maxNotes int) []Candidate {
	if judged && dv.c.b < d.cfg.RareShare*p.n.b && len(notes) < maxNotes && d.outcomeChange(p, a, dv) {
		notes = append(notes, Candidate{place: p, attr: a, value: dv})
	}
	dv.c.add(p.wr)
	return notes
}

// outcomeChange says whether a rare number is a change an outcome shows: a
// count that drops to zero, or a magnitude above every common one (not rare)
// of the baseline. A rare magnitude below or among them is the traffic's mix
// (a family of short prompts), not a failure.
func (d *Drift) outcomeChange(p *driftPlace, a *driftAttr, dv *driftValue) bool {
	if dv.order == noOrder || dv.order == 0 {
		return true
	}
	common := d.cfg.RareShare * p.n.b
	for _, v := range a.values {
		if v != dv && v.order != noOrder && v.order >= dv.order && v.c.b >= common {
			return false
		}
	}
	return true
}

// joinBlock adds the place's last block of records to its baseline, rare
// values on the rise at a sixteenth of their weight, and then lists anew the
// attributes whose absence is judged.
// When the baselines are shared, the block is put in the outbox as it
// joined, for the peers.
func (d *Drift) joinBlock(p *driftPlace) {
	records := p.n.block
	decay := d.decay(p, records)
	join := func(v *driftValue) float64 {
		weight := 1.0
		if d.rising(p, v) {
			weight = 1.0 / 16
		}
		return v.c.join(decay, weight)
	}
	var blk *DriftBlock
	if d.outbox != nil {
		blk = &DriftBlock{Service: p.key.service, Stage: p.key.stage, Span: p.key.span, Records: records,
			Attrs: make([]BlockAttr, 0, len(p.list))}
	}
	for _, a := range p.list {
		ba := BlockAttr{Name: a.name, Present: a.present.join(decay, 1), Dimension: a.dimension}
		ba.Absent = records - ba.Present
		if a.absent != nil {
			ba.Absent = join(a.absent)
		}
		for _, v := range a.values {
			if joined := join(v); joined > 0 && blk != nil {
				ba.Values = append(ba.Values, blockValue(v, joined))
			}
		}
		if blk != nil {
			blk.Attrs = append(blk.Attrs, ba)
		}
	}
	p.n.join(decay, 1)
	d.refreshUsual(p)
	if blk != nil {
		d.outbox.put(blk)
	}
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
// its baseline little.
func (d *Drift) rising(p *driftPlace, dv *driftValue) bool {
	if p.n.b < d.cfg.MinBaseline || dv.c.b >= d.cfg.RareShare*p.n.b {
		return false
	}
	recent, n := dv.c.r/p.wr, p.n.r/p.wr
	if dv.native && p.n.b*d.cfg.RareShare < risingEvidence && recent < 2*d.cfg.RareShare*n {
		return false
	}
	return recent >= 3 && recent >= 3*max(dv.c.b/p.n.b, 0.5/p.n.b)*n
}

// surging says whether a rare value's recent share is SurgeRatio times its
// baseline share and, beyond chance, above what the baseline predicts.
func (d *Drift) surging(p *driftPlace, dv *driftValue) bool {
	if p.n.b < d.cfg.MinBaseline {
		return false
	}
	baseShare := max(dv.c.b/p.n.b, 0.5/p.n.b)
	if baseShare >= d.cfg.RareShare {
		return false
	}
	recent, n := dv.c.r/p.wr, p.n.r/p.wr
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
			if surging = d.surging(c.place, c.value); surging {
				reason = Reason{Kind: KindValueDrift, Service: c.place.key.service, Stage: c.place.key.stage,
					Attribute: c.attr.name, Value: c.value.value,
					Baseline: c.value.c.b / c.place.n.b, Current: c.value.c.r / c.place.n.r}
			}
		})
		if surging {
			add(reason)
		}
	}
}

// refreshUsual lists the attributes present on all but a rare share of the
// baseline: their absence becomes a value of its own.
func (d *Drift) refreshUsual(p *driftPlace) {
	if p.n.b < d.cfg.MinBaseline {
		return
	}
	p.usual = p.usual[:0]
	for _, a := range p.list {
		usual := a.present.b >= (1-d.cfg.RareShare)*p.n.b
		switch {
		case usual && a.absent == nil:
			// Start from the absences the counts imply.
			a.absent = &driftValue{value: Absent, order: noOrder, c: cell{b: max(0, p.n.b-a.present.b), r: max(0, p.n.r-a.present.r)}}
			a.seen = p.seq // counted from the next record on
		case !usual && a.absent != nil && a.absent.c.b > d.cfg.RareShare*p.n.b:
			a.absent = nil // its absence is common now
		}
		if a.absent != nil {
			p.usual = append(p.usual, a)
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
	for _, a := range p.list {
		scale(&a.present)
		if a.absent != nil {
			scale(&a.absent.c)
		}
		for _, v := range a.values {
			scale(&v.c)
		}
	}
	p.wr = 1
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
// not numbers, long text, maps, lists, bytes.
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
		s := v.Str()
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

// magnitude writes the power-of-two range holding f: "0", "0..1", "1",
// "2..3", "4..7", and the same negated; order ranks it: 0 for zero, 1 for
// fractions, 2+k for [2^k, 2^(k+1)), negative for negative numbers.
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
