package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"
)

// Summary is what Run sent.
type Summary struct {
	Requests, Spans, Logs int // Logs counts every log record sent, noise included
	Elapsed               time.Duration
	RecordsPerSecond      float64
}

// shutdownTimeout bounds the final flush, which still runs when ctx has ended.
const shutdownTimeout = 30 * time.Second

// Run generates and sends until the config's limits or ctx end, writes one
// Truth JSON line per request to truth (may be nil), flushes and shuts the SDK
// providers down (everything is exported before it returns) and returns what
// it sent. The end of ctx stops generation but not the final flush. The first
// export error stops the run and is returned.
func Run(ctx context.Context, cfg Config, target Target, truth io.Writer) (Summary, error) {
	if err := target.Validate(); err != nil {
		return Summary{}, err
	}
	gen, err := NewGenerator(cfg)
	if err != nil {
		return Summary{}, err
	}
	em, err := newEmitter(ctx, target, len(gen.topo.all))
	if err != nil {
		return Summary{}, err
	}
	var (
		truthBuf *bufio.Writer
		enc      *json.Encoder
	)
	if truth != nil {
		truthBuf = bufio.NewWriter(truth)
		enc = json.NewEncoder(truthBuf)
	}

	var sum Summary
	pace := pacer{rate: cfg.Rate}
	started := time.Now()
	runErr := func() error {
		for cfg.Requests == 0 || sum.Requests < cfg.Requests {
			now := time.Now()
			elapsed := now.Sub(started)
			if cfg.Duration > 0 && elapsed >= cfg.Duration {
				return nil
			}
			if wait := pace.delay(sum.Spans+sum.Logs, elapsed); wait > 0 {
				if cfg.Duration > 0 {
					wait = min(wait, cfg.Duration-elapsed)
				}
				if !sleep(ctx, wait) {
					return nil
				}
				continue
			}
			select {
			case <-ctx.Done():
				return nil // the caller stopped the run: not an error
			default:
			}
			req := gen.Next(now)
			em.emit(req)
			sum.Requests++
			sum.Spans += len(req.Spans)
			sum.Logs += len(req.Logs)
			if enc != nil {
				if err := enc.Encode(&req.Truth); err != nil {
					return err
				}
			}
			if em.failed() {
				return nil // em.close returns the export error
			}
		}
		return nil
	}()

	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	errs := []error{runErr, em.close(closeCtx)}
	if truthBuf != nil {
		errs = append(errs, truthBuf.Flush())
	}
	sum.Elapsed = time.Since(started)
	sum.RecordsPerSecond = float64(sum.Spans+sum.Logs) / sum.Elapsed.Seconds()
	return sum, errors.Join(errs...)
}

// pacer spreads records evenly over time: record n is due n/rate seconds
// after the start. A run that fell behind catches up at full speed.
type pacer struct{ rate float64 }

// delay is how long to wait, after sending sent records in elapsed, before
// sending more; zero or less means now.
func (p pacer) delay(sent int, elapsed time.Duration) time.Duration {
	if p.rate <= 0 {
		return 0
	}
	return time.Duration(float64(sent)/p.rate*float64(time.Second)) - elapsed
}

// sleep waits for d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
