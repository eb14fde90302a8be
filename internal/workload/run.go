package workload

import (
	"bufio"
	"container/heap"
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

// Source is a request model that Send can drive: *Generator (the loom family)
// or any other family of workloads.
type Source interface {
	// Next models the next request, placed so that it ends at end; the
	// request is the caller's to keep.
	Next(end time.Time) *Request
	// Services is how many service instances the requests come from. Each
	// *Service is one OTel Resource for the whole run: a source hands out the
	// same pointer for every record of an instance.
	Services() int
}

// Services is how many service instances the loom family emits from.
func (g *Generator) Services() int { return len(g.topo.all) }

// Run generates the loom family's traffic for cfg and sends it; see Send.
func Run(ctx context.Context, cfg Config, target Target, truth io.Writer) (Summary, error) {
	if err := target.Validate(); err != nil {
		return Summary{}, err
	}
	gen, err := NewGenerator(cfg)
	if err != nil {
		return Summary{}, err
	}
	return Send(ctx, gen, cfg.Pace(), target, truth)
}

// Send models requests from src and sends them until pace's limits or ctx
// end, writes one Truth JSON line per request to truth (may be nil), flushes
// and shuts the SDK providers down (everything is exported before it returns)
// and returns what it sent. A request's Late records are sent when the clock
// reaches their time; those still held when the run ends are sent then. The
// end of ctx stops generation but not the final flush. The first export error
// stops the run and is returned.
func Send(ctx context.Context, src Source, pace Pace, target Target, truth io.Writer) (Summary, error) {
	if err := target.Validate(); err != nil {
		return Summary{}, err
	}
	if err := pace.Validate(); err != nil {
		return Summary{}, err
	}
	em, err := newEmitter(ctx, target, src.Services())
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

	var (
		sum  Summary
		late lateLogs
	)
	sendLate := func(until time.Time) {
		for len(late) > 0 && !late[0].Time.After(until) {
			l := heap.Pop(&late).(Log)
			em.log(&l)
			sum.Logs++
		}
	}
	pacing := pacer{rate: pace.Rate}
	started := time.Now()
	runErr := func() error {
		for pace.Requests == 0 || sum.Requests < pace.Requests {
			// The wall clock, as the records' timestamps are: compared by the
			// monotonic clock, a Late record would be due on another clock than
			// the one its timestamp and the requests' are written on, and the
			// two drift apart while the host's clock is being slewed.
			now := time.Now().Round(0)
			sendLate(now)
			elapsed := now.Sub(started)
			if pace.Duration > 0 && elapsed >= pace.Duration {
				return nil
			}
			if wait := pacing.delay(sum.Spans+sum.Logs, elapsed); wait > 0 {
				if pace.Duration > 0 {
					wait = min(wait, pace.Duration-elapsed)
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
			req := src.Next(now)
			em.emit(req)
			for _, l := range req.Late {
				heap.Push(&late, l)
			}
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
	for len(late) > 0 { // held when the run ended: sent now, before their time
		sendLate(late[0].Time)
	}

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

// lateLogs holds Late records until they are due: a heap, earliest first.
type lateLogs []Log

func (h lateLogs) Len() int           { return len(h) }
func (h lateLogs) Less(i, j int) bool { return h[i].Time.Before(h[j].Time) }
func (h lateLogs) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lateLogs) Push(x any)        { *h = append(*h, x.(Log)) }

func (h *lateLogs) Pop() any {
	old := *h
	l := old[len(old)-1]
	*h = old[:len(old)-1]
	return l
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
