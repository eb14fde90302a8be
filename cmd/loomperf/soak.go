package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// soakOptions are a soak run's: one pipeline at one load for a long time.
type soakOptions struct {
	pipeline pipeline
	load     float64
	duration time.Duration
	// every is how often the resident set is printed; the slope is fitted
	// to the samples after warmup.
	every, warmup time.Duration
}

// sample is the collector's resident set at a time into the run.
type sample struct {
	at  time.Duration
	rss int64
}

// soak runs the pipeline and prints its resident set every opts.every, then
// the slope after warm-up. It fails only when the collector does.
func soak(bin, repo string, opts soakOptions, w io.Writer) ([]sample, error) {
	cfg, err := opts.pipeline.config(repo)
	if err != nil {
		return nil, err
	}
	c, err := startCollector(bin, cfg)
	if err != nil {
		return nil, err
	}
	l, err := startLoad(c.otlp, opts.load, 1)
	if err != nil {
		return nil, errors.Join(err, c.stop())
	}
	fmt.Fprintf(w, "loomperf soak: %s at %s for %s, resident set every %s (the load generator shares the cores)\n",
		opts.pipeline.name, loadName(opts.load), opts.duration, opts.every)
	start := time.Now()
	var samples []sample
	for at := opts.every; at <= opts.duration; at += opts.every {
		if err := c.wait(time.Until(start.Add(at))); err != nil {
			l.stop()
			return samples, errors.Join(err, c.stop())
		}
		m, err := memoryOf(c.cmd.Process.Pid)
		if err != nil {
			l.stop()
			return samples, errors.Join(err, c.stop())
		}
		samples = append(samples, sample{time.Since(start), m.rss})
		fmt.Fprintf(w, "t=%-7s rss=%4.0f MiB peak=%4.0f MiB accepted=%d refused=%d\n",
			time.Since(start).Round(time.Second), float64(m.rss)/mib, float64(m.peak)/mib, l.accepted.Load(), l.refused.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	self, err := c.selfMetrics(ctx)
	var b *breakdown
	if err == nil {
		b, err = memoryBreakdown(ctx, c, self)
	}
	if err != nil {
		fmt.Fprintf(w, "no memory breakdown: %v\n", err)
	} else {
		fmt.Fprintln(w)
		printBreakdown(w, "At the end", b)
	}
	l.stop()
	err = c.stop()
	if slope, n, ok := slopeAfter(samples, opts.warmup); ok {
		fmt.Fprintf(w, "slope after %s of warm-up: %+.2f MiB/min (least squares over %d samples)\n", opts.warmup, slope, n)
	} else {
		fmt.Fprintf(w, "slope: fewer than two samples after %s of warm-up\n", opts.warmup)
	}
	return samples, err
}

// slopeAfter fits rss = a + b*t by least squares to the samples after
// warmup and returns b in MiB per minute.
func slopeAfter(samples []sample, warmup time.Duration) (mibPerMin float64, n int, ok bool) {
	var sx, sy, sxx, sxy float64
	for _, s := range samples {
		if s.at < warmup {
			continue
		}
		x, y := s.at.Minutes(), float64(s.rss)/mib
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		n++
	}
	den := float64(n)*sxx - sx*sx
	if n < 2 || den == 0 {
		return 0, n, false
	}
	return (float64(n)*sxy - sx*sy) / den, n, true
}
