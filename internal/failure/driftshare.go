package failure

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// DriftBlock is a block of one place's records as it joined the baseline of
// the instance that saw them, rare values on the rise already discounted:
// what a peer adds to its own baseline of the place, so that instances
// behind a load balancer, each seeing a share of every place, learn each
// baseline from all of its records.
type DriftBlock struct {
	Service string `json:"svc"`
	Stage   string `json:"stage"`
	Span    bool   `json:"span,omitempty"`
	// Records is the number of the place's records in the block.
	Records float64     `json:"n"`
	Attrs   []BlockAttr `json:"attrs,omitempty"`
}

// BlockAttr is what a block's records showed of one attribute.
type BlockAttr struct {
	Name string `json:"k"`
	// Present is the number of records that carried it, Absent the
	// (weighted) number that did not.
	Present float64 `json:"p,omitempty"`
	Absent  float64 `json:"a,omitempty"`
	// Dimension: its values are not tracked (too many, or not outcomes).
	Dimension bool         `json:"dim,omitempty"`
	Values    []BlockValue `json:"v,omitempty"`
}

// BlockValue is one value's (weighted) count in a block.
type BlockValue struct {
	Value string `json:"v"`
	// Order ranks a number's magnitude, unless Word: a word or a boolean.
	Order int  `json:"o,omitempty"`
	Word  bool `json:"w,omitempty"`
	// Native: the value was seen in the place's first records.
	Native bool    `json:"nat,omitempty"`
	Count  float64 `json:"c"`
}

func blockValue(v *driftValue, count float64) BlockValue {
	bv := BlockValue{Value: v.value, Count: count, Native: v.native, Word: v.order == noOrder}
	if !bv.Word {
		bv.Order = v.order
	}
	return bv
}

// outbox keeps the blocks joined since the last TakeBlocks, up to max.
type outbox struct {
	mu      sync.Mutex
	blocks  []DriftBlock
	max     int
	dropped int
}

func (o *outbox) put(b *DriftBlock) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.blocks) >= o.max {
		o.dropped++
		return
	}
	o.blocks = append(o.blocks, *b)
}

// TakeBlocks returns the blocks that joined a baseline since it was last
// called, for the peers, and how many did not fit in the outbox; nothing
// unless DriftConfig.Outbox is set.
func (d *Drift) TakeBlocks() (blocks []DriftBlock, dropped int) {
	if d.outbox == nil {
		return nil, 0
	}
	o := d.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	blocks, dropped = o.blocks, o.dropped
	o.blocks, o.dropped = nil, 0
	return blocks, dropped
}

// Bounds of what a block may name: longer strings are not what Drift learns.
const (
	maxKeyLen   = 1024
	maxValueLen = 48 // a magnitude's range such as "-2305843009213693952..4611686018427387903"
	maxOrder    = 66
)

// MergeBlock adds a peer's block to the baseline of its place, as one of
// this instance's own blocks would join it: the baseline decays by the
// block's records, places, attributes and values are added within the same
// bounds. A block that Drift could not have produced is refused whole.
func (d *Drift) MergeBlock(b *DriftBlock) error {
	if err := b.check(blockRecords); err != nil {
		return err
	}
	sh, p := d.places.acquire(placeKey{service: b.Service, stage: b.Stage, span: b.Span}, newDriftPlace)
	defer sh.mu.Unlock()
	d.merge(p, b)
	return nil
}

func (d *Drift) merge(p *driftPlace, b *DriftBlock) {
	if !p.settled {
		d.admit(p, b)
	}
	p.decayBaseline(d.decay(p, b.Records))
	d.mergeCounts(p, b, func(c *cell, n float64) { c.b += n })
	d.settle(p)
}

// mergeCounts adds each count of b to its cell of the place through add,
// adding the attributes and values b names within the place's bounds.
func (d *Drift) mergeCounts(p *driftPlace, b *DriftBlock, add func(c *cell, n float64)) {
	add(&p.n, b.Records)
	for i := range b.Attrs {
		ba := &b.Attrs[i]
		if skipAttribute(ba.Name) {
			continue
		}
		a := d.attr(p, ba.Name)
		if a == nil {
			continue
		}
		add(&a.present, ba.Present)
		if ba.Dimension {
			a.dimension, a.values = true, nil
		}
		if a.dimension {
			continue
		}
		for _, bv := range ba.Values {
			order := bv.Order
			if bv.Word {
				order = noOrder
			}
			dv := d.value(p, a, []byte(bv.Value), order, bv.Native)
			if dv == nil {
				break
			}
			add(&dv.c, bv.Count)
		}
	}
}

// decayBaseline scales the place's baseline counts by f.
func (p *driftPlace) decayBaseline(f float64) {
	if f == 1 {
		return
	}
	p.n.b *= f
	p.own.b *= f
	for _, a := range p.list {
		a.present.b *= f
		for _, v := range a.values {
			v.c.b *= f
		}
	}
	for _, sh := range p.shapes {
		sh.c.b *= f
	}
}

var errBlock = errors.New("drift block")

// check says whether b is what Drift produces of at most maxRecords records.
func (b *DriftBlock) check(maxRecords float64) error {
	switch {
	case b.Stage == "" && b.Service == "" || len(b.Stage) > maxKeyLen || len(b.Service) > maxKeyLen:
		return fmt.Errorf("%w: service or stage must be set, each at most %d bytes", errBlock, maxKeyLen)
	case !count(b.Records, maxRecords) || b.Records == 0:
		return fmt.Errorf("%w: records must be above 0 and at most %v; got %v", errBlock, maxRecords, b.Records)
	}
	for i := range b.Attrs {
		a := &b.Attrs[i]
		if a.Name == "" || len(a.Name) > maxKeyLen || !count(a.Present, b.Records) || !count(a.Absent, b.Records) ||
			a.Dimension && len(a.Values) > 0 {
			return fmt.Errorf("%w: attribute %d is not one a block of %v records has", errBlock, i, b.Records)
		}
		for _, v := range a.Values {
			if v.Value == "" || len(v.Value) > maxValueLen || !count(v.Count, b.Records) || v.Order < -maxOrder || v.Order > maxOrder {
				return fmt.Errorf("%w: a value of attribute %q is not one a block of %v records has", errBlock, a.Name, b.Records)
			}
		}
	}
	return nil
}

// count says whether n is a count of at most limit records.
func count(n, limit float64) bool {
	return n >= 0 && n <= limit && !math.IsNaN(n)
}

// TakeRecent returns, for every place that saw records of its own since it
// was last called, their counts (records, every tracked attribute's
// presence and absence, every value's), for the peers to add to their
// recent windows: each instance behind a load balancer sees a share of a
// surge, and together they see it whole. At most DriftConfig.Outbox places
// are returned; dropped counts the others. Nothing unless Outbox is set.
func (d *Drift) TakeRecent() (recent []DriftBlock, dropped int) {
	if d.outbox == nil {
		return nil, 0
	}
	d.places.each(func(p *driftPlace) {
		records := p.n.fresh
		if records == 0 {
			return
		}
		if len(recent) < d.outbox.max {
			recent = append(recent, p.takeFresh())
		} else {
			p.takeFresh()
			dropped++
		}
	})
	return recent, dropped
}

// takeFresh returns the place's own records since the last call, and
// starts counting anew.
func (p *driftPlace) takeFresh() DriftBlock {
	records := p.n.fresh
	p.n.fresh = 0
	b := DriftBlock{Service: p.key.service, Stage: p.key.stage, Span: p.key.span, Records: records,
		Attrs: make([]BlockAttr, 0, len(p.list))}
	for _, a := range p.list {
		// Every attribute goes, the absent ones too: a field that stops
		// being written is a surge of its absence.
		ba := BlockAttr{Name: a.name, Present: a.present.fresh, Absent: records - a.present.fresh, Dimension: a.dimension}
		a.present.fresh = 0
		for _, v := range a.values {
			if v.c.fresh > 0 {
				ba.Values = append(ba.Values, blockValue(v, v.c.fresh))
				v.c.fresh = 0
			}
		}
		b.Attrs = append(b.Attrs, ba)
	}
	return b
}

// maxRecentRecords bounds the records of one place a peer saw between two
// pushes: a million a second is beyond any gateway.
const maxRecentRecords = 1 << 20

// recentSpan is how many half-lives of the recent window a peer's records
// may advance it at once: after as many, nothing of it is left to weigh.
const recentSpan = 64

// MergeRecent adds a peer's recent records of a place (TakeRecent's) to the
// place's recent window as if they had just arrived here: the window decays
// by as many records, and they weigh as the latest. They do not join this
// instance's baseline: the peer's blocks bring them there. They count
// among the place's first records that make its native values: a value
// native to the place is native to it on every instance, however many
// share its traffic. What Drift could not have produced is refused whole.
func (d *Drift) MergeRecent(b *DriftBlock) error {
	if err := b.check(maxRecentRecords); err != nil {
		return err
	}
	sh, p := d.places.acquire(placeKey{service: b.Service, stage: b.Stage, span: b.Span}, newDriftPlace)
	defer sh.mu.Unlock()
	// A record's weight grows by gr per record: those of the n records
	// arriving now sum to wr·(gr^n-1)/(gr-1), shared evenly among the
	// counts of b.
	n := min(b.Records, recentSpan*d.cfg.RecentRecords)
	growth := math.Pow(d.gr, n)
	perRecord := p.wr * (growth - 1) / (d.gr - 1) / b.Records
	p.peerRecords += b.Records
	d.mergeCounts(p, b, func(c *cell, count float64) { c.r += count * perRecord })
	p.advance(growth)
	return nil
}
