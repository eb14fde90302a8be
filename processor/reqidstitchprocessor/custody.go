package reqidstitchprocessor // import "github.com/loom-otel/loom/processor/reqidstitchprocessor"

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/internal/custody"
)

// openJournal opens the storage named by storage, if any, and takes in what
// the last run left there: records that waited in the hold wait again;
// records on their way out are passed on as they were.
func (p *stitchProcessor[T]) openJournal(ctx context.Context, host component.Host) error {
	storageID := p.s.cfg.Storage
	if storageID == nil {
		return nil
	}
	key := "processors::" + p.id.String() + "::storage"
	if err := custody.CheckPipelines(key, p.id, p.sig.name, p.s.pipelines(p.sig.name)); err != nil {
		return err
	}
	j, err := custody.Open(ctx, host, *storageID, component.KindProcessor, p.id, p.sig.name, key)
	if err != nil {
		return err
	}
	p.journal = j
	entries, err := j.Replay(ctx)
	if err != nil {
		return err
	}
	var out releases[T]
	var counts tally
	now := p.s.nowNanos()
	dropped := 0
	p.mu.Lock()
	for _, e := range entries {
		heldCtx, data, err := p.sig.unmarshal(e.Data)
		kind := e.Seq.Kind()
		if err == nil && kind != entryHeld && kind != entryPassedOn {
			err = fmt.Errorf("unknown entry kind %d", kind)
		}
		switch {
		case err != nil:
			dropped++
			p.logger.Warn("Dropped records the last run held in storage", zap.Uint64("entry", uint64(e.Seq)), zap.Error(err))
			if err := j.Release(ctx, e.Seq); err != nil {
				p.mu.Unlock()
				return err
			}
		case kind == entryPassedOn:
			out = append(out, outgoing[T]{ctx: heldCtx, data: data, seqs: []custody.Seq{e.Seq}, stitched: true})
		default:
			held := parked[T]{data: data, bytes: p.sig.size(data), ctx: heldCtx, client: custody.ClientKey(heldCtx), seq: e.Seq}
			if !p.hold.enabled() || !p.hold.push(held, now, func(old parked[T]) { release(p.s, &out, &counts, p.sig, old, outcomeOverflow) }) {
				release(p.s, &out, &counts, p.sig, held, outcomeExpired)
			}
		}
	}
	p.mu.Unlock()
	p.s.tel.flush(ctx, &counts)
	if len(entries) > 0 {
		p.logger.Info("Replayed the records the last run held and had not passed on",
			zap.Int("entries", len(entries)), zap.Int("dropped", dropped))
	}
	p.passOn(out)
	return nil
}
