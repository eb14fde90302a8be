package reqsamplingprocessor

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	pdatarequest "go.opentelemetry.io/collector/pdata/xpdata/request"
	"go.uber.org/zap"

	"github.com/loom-otel/loom/internal/custody"
)

// outlet is one processor's pipeline: the records it took in go back to it.
type outlet struct {
	signal signal
	logs   consumer.Logs
	traces consumer.Traces
}

func (o *outlet) consume(ctx context.Context, b *batch) error {
	if o.signal == signalLogs {
		return o.logs.ConsumeLogs(ctx, b.logs)
	}
	return o.traces.ConsumeTraces(ctx, b.traces)
}

// addOutlet adds a created processor's pipeline; the collector creates every
// processor before it starts any.
func (s *sampler) addOutlet(o *outlet) *outlet {
	s.outlets[o.signal] = append(s.outlets[o.signal], o)
	return o
}

// A journal entry holds a batch as it arrived, or its kept records once
// decided: those are replayed as they are, so a redelivery is identical.
func arrivedKind(sig signal) custody.Kind { return custody.Kind(1 + sig) }
func decidedKind(sig signal) custody.Kind { return custody.Kind(1 + numSignals + sig) }

func kindOf(k custody.Kind) (sig signal, decided, ok bool) {
	n := int(k) - 1
	if n < 0 || n >= 2*int(numSignals) {
		return 0, false, false
	}
	return signal(n % int(numSignals)), n >= int(numSignals), true
}

// marshal encodes a batch with its context's client metadata, as
// exporterhelper's persistent queue does, so that a replay keeps it.
func marshal(b *batch) ([]byte, error) {
	if b.signal == signalLogs {
		return pdatarequest.MarshalLogs(b.ctx, b.logs)
	}
	return pdatarequest.MarshalTraces(b.ctx, b.traces)
}

// openJournal opens the storage named by storage, if any, and reads what
// the last run left there, to replay each signal's as its processor starts.
func (s *sampler) openJournal(ctx context.Context, host component.Host) error {
	if s.cfg.Storage == nil {
		return nil
	}
	key := "processors::" + s.id.String() + "::storage"
	for sig, outs := range s.outlets {
		if err := custody.CheckPipelines(key, s.id, signalNames[sig], len(outs)); err != nil {
			return err
		}
	}
	j, err := custody.Open(ctx, host, *s.cfg.Storage, component.KindProcessor, s.id, "", key)
	if err != nil {
		return err
	}
	s.journal = j
	entries, err := j.Replay(ctx)
	if err != nil {
		return err
	}
	for _, e := range entries {
		var why error
		switch sig, _, ok := kindOf(e.Seq.Kind()); {
		case !ok:
			why = fmt.Errorf("unknown entry kind %d", e.Seq.Kind())
		case len(s.outlets[sig]) == 0:
			why = fmt.Errorf("no %s pipeline uses %s any more", signalNames[sig], s.id)
		default:
			s.unreplayed[sig] = append(s.unreplayed[sig], e)
			continue
		}
		if err := s.drop(ctx, e, why); err != nil {
			return err
		}
	}
	return nil
}

// drop deletes an entry that cannot be replayed, and says why.
func (s *sampler) drop(ctx context.Context, e custody.Entry, why error) error {
	s.logger.Warn("Dropped records the last run kept in storage", zap.Uint64("entry", uint64(e.Seq)), zap.Error(why))
	return s.journal.Release(ctx, e.Seq)
}

// keep writes an arriving batch to storage, before its sender is answered.
func (s *sampler) keep(ctx context.Context, b *batch) error {
	if s.journal == nil {
		return nil
	}
	data, err := marshal(b)
	if err != nil {
		return err
	}
	e := custody.Entry{Seq: s.journal.Next(arrivedKind(b.signal)), Data: data}
	if err := s.journal.Keep(ctx, e); err != nil {
		return fmt.Errorf("keeping records in storage: %w", err)
	}
	b.seq = e.Seq
	return nil
}

// keepDecided replaces a batch's entry by its kept records, annotated, so
// that a crash before unkeep replays exactly what was passed on.
func (s *sampler) keepDecided(b *batch) {
	if s.journal == nil {
		return
	}
	data, err := marshal(b)
	if err == nil {
		e := custody.Entry{Seq: s.journal.Next(decidedKind(b.signal)), Data: data}
		if err = s.journal.Replace(context.Background(), []custody.Seq{b.seq}, e); err == nil {
			b.seq = e.Seq
		}
	}
	if err != nil {
		s.logger.Warn("Could not keep decided records in storage; a crash now would decide them again", zap.Error(err))
	}
}

// unkeep deletes a batch's entry once the next consumer has returned.
func (s *sampler) unkeep(b *batch) {
	if s.journal == nil || b.seq == 0 {
		return
	}
	if err := s.journal.Release(context.Background(), b.seq); err != nil {
		s.logger.Warn("Could not delete passed-on records from storage; a crash now would pass them on again", zap.Error(err))
	}
}

// replay takes in again what the last run kept of sig's records and never
// passed on: batches as they arrived wait for a decision again; decided ones
// are passed on as they are, with the client metadata they came with.
func (s *sampler) replay(ctx context.Context, sig signal) error {
	entries := s.unreplayed[sig]
	s.unreplayed[sig] = nil
	var replayed, lost int
	for _, e := range entries {
		b, decided, err := s.unmarshalEntry(e)
		if err != nil {
			lost++
			if err := s.drop(ctx, e, err); err != nil {
				return err
			}
			continue
		}
		replayed++
		b.to, b.seq = s.outlets[sig][0], e.Seq
		if decided {
			if err := b.to.consume(b.ctx, b); err != nil {
				s.logger.Warn("The next consumer refused replayed records", zap.Error(err))
			}
			s.unkeep(b)
			continue
		}
		if err := s.admit(ctx, b); err != nil {
			return err
		}
	}
	if replayed+lost > 0 {
		s.logger.Info("Replayed the records the last run kept and had not passed on",
			zap.String("signal", signalNames[sig]), zap.Int("batches", replayed), zap.Int("dropped", lost))
	}
	return nil
}

// unmarshalEntry rebuilds a batch from its entry: scanned again when it
// waits for a decision, as it was on arrival.
func (s *sampler) unmarshalEntry(e custody.Entry) (b *batch, decided bool, err error) {
	sig, decided, ok := kindOf(e.Seq.Kind())
	if !ok {
		return nil, false, fmt.Errorf("unknown entry kind %d", e.Seq.Kind())
	}
	sc := s.scanners.Get().(*scanner)
	defer s.scanners.Put(sc)
	switch sig {
	case signalLogs:
		ctx, ld, err := pdatarequest.UnmarshalLogs(e.Data)
		if err != nil {
			return nil, false, err
		}
		b = &batch{signal: sig, logs: ld}
		if !decided {
			b = sc.scanLogs(ld)
		}
		b.ctx = ctx
	default:
		ctx, td, err := pdatarequest.UnmarshalTraces(e.Data)
		if err != nil {
			return nil, false, err
		}
		b = &batch{signal: sig, traces: td}
		if !decided {
			b = sc.scanTraces(td)
		}
		b.ctx = ctx
	}
	return b, decided, nil
}
