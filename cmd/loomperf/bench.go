package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// options are one benchmark run's settings.
type options struct {
	bin, repo string
	pipelines []pipeline
	loads     []float64 // records/s; 0 is unthrottled
	reps      int
	// warmup runs the load before the measurement starts: longer than the
	// samplers' 10 s decision wait, so that records are leaving as fast as
	// they arrive.
	warmup, window time.Duration
	// breakdown adds the Go heap by component and the memory outside it to
	// every loom run.
	breakdown bool
	progress  io.Writer
	// loadAvg is /proc/loadavg before and after the runs: other work on
	// the machine, which the report names.
	loadAvg [2]string
}

// result is one pipeline at one load, one repetition.
type result struct {
	pipeline string
	load     float64
	rep      int
	cpu      time.Duration // the collector's, in the window
	window   time.Duration
	accepted int64 // records, in the window
	// refusedClient counts the records of the window's failed exports and
	// those rejected in partial successes; refusedCollector is the
	// collector's otelcol_receiver_refused_* over its whole run.
	refusedClient    int64
	refusedCollector float64
	failedExports    int64
	mem              memory // at the end of the window
	breakdown        *breakdown
}

// cpuPer10k is CPU seconds per 10 000 accepted records.
func (r result) cpuPer10k() float64 {
	if r.accepted == 0 {
		return 0
	}
	return r.cpu.Seconds() / (float64(r.accepted) / 1e4)
}

// throughput is accepted records per second.
func (r result) throughput() float64 { return float64(r.accepted) / r.window.Seconds() }

// run measures every pipeline at every load, repetitions outermost and
// pipelines innermost, so that the pipelines compared are measured next to
// each other in time.
func run(opts *options) ([]result, error) {
	opts.loadAvg[0] = loadAvg()
	defer func() { opts.loadAvg[1] = loadAvg() }()
	var results []result
	for rep := 1; rep <= opts.reps; rep++ {
		for _, load := range opts.loads {
			for _, p := range opts.pipelines {
				fmt.Fprintf(opts.progress, "loomperf: %s at %s, repetition %d/%d\n", p.name, loadName(load), rep, opts.reps)
				r, err := measure(*opts, p, load, rep)
				if err != nil {
					return results, fmt.Errorf("%s at %s, repetition %d: %w", p.name, loadName(load), rep, err)
				}
				results = append(results, r)
			}
		}
	}
	return results, nil
}

func measure(opts options, p pipeline, load float64, rep int) (res result, err error) {
	cfg, err := p.config(opts.repo)
	if err != nil {
		return result{}, err
	}
	c, err := startCollector(opts.bin, cfg)
	if err != nil {
		return result{}, err
	}
	defer func() { err = errors.Join(err, c.stop()) }()
	l, err := startLoad(c.otlp, load, uint64(rep))
	if err != nil {
		return result{}, err
	}
	defer l.stop()
	pid := c.cmd.Process.Pid

	if err := c.wait(opts.warmup); err != nil {
		return result{}, err
	}
	cpu0, err := cpuTime(pid)
	if err != nil {
		return result{}, err
	}
	accepted0, refused0, failed0, t0 := l.accepted.Load(), l.refused.Load(), l.failedExports.Load(), time.Now()
	if err := c.wait(opts.window); err != nil {
		return result{}, err
	}
	cpu1, err := cpuTime(pid)
	if err != nil {
		return result{}, err
	}
	res = result{
		pipeline: p.name, load: load, rep: rep,
		cpu: cpu1 - cpu0, window: time.Since(t0),
		accepted: l.accepted.Load() - accepted0, refusedClient: l.refused.Load() - refused0,
		failedExports: l.failedExports.Load() - failed0,
	}
	if res.mem, err = memoryOf(pid); err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	self, err := c.selfMetrics(ctx)
	if err != nil {
		return result{}, fmt.Errorf("the collector's own metrics: %w", err)
	}
	res.refusedCollector = sumPrefix(self, "otelcol_receiver_refused_")
	if opts.breakdown && p.name == "loom" {
		if res.breakdown, err = memoryBreakdown(ctx, c, self); err != nil {
			return result{}, err
		}
	}
	if res.accepted == 0 {
		return res, fmt.Errorf("the collector accepted nothing in %s (first export error: %w)", opts.window, l.err())
	}
	return res, nil
}

// wait lets the load run for d; an error when the collector exits meanwhile.
func (c *collector) wait(d time.Duration) error {
	select {
	case <-c.exited:
		return fmt.Errorf("the collector exited under load (%w); its log:\n%s", c.waitErr, c.logTail())
	case <-time.After(d):
		return nil
	}
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(b))
	return strings.Join(fields[:min(3, len(fields))], " ")
}

func loadName(load float64) string {
	if load == 0 {
		return "unthrottled"
	}
	return fmt.Sprintf("%gk/s", load/1000)
}
