// Command loomperf measures the built collector as a whole process: Loom's
// default pipeline beside the stock components doing the closest job and
// the floor (otlp -> batch -> debug), at fixed offered loads of loomgen's
// traffic, interleaved and repeated, as CPU per record, resident memory,
// throughput at saturation and refusals, with ratios. A soak mode prints a
// pipeline's resident set over time and its slope; a profile mode takes
// CPU and allocation profiles from the running collector. `make perf` runs
// it; see the README's "Performance" section.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := runMain(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loomperf:", err)
		}
		os.Exit(1)
	}
}

func runMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loomperf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	repo := fs.String("repo", ".", "repository root: distribution/config.yaml is read from there")
	bin := fs.String("bin", "", "collector binary (default REPO/bin/otelcol-loom, `make build`)")
	names := fs.String("pipelines", "loom,stock,floor", "pipelines to compare: loom, stock, floor")
	loadList := fs.String("loads", "5000,10000,20000,0", "offered loads in records/s, comma-separated; 0 is unthrottled")
	reps := fs.Int("reps", 3, "repetitions; the pipelines are interleaved in each")
	warmup := fs.Duration("warmup", 15*time.Second, "load before the measurement starts (more than the samplers' 10 s decision wait)")
	window := fs.Duration("window", 30*time.Second, "measured time per run")
	breakdown := fs.Bool("breakdown", true, "loom's memory by component (heap profile) and outside the Go runtime")
	soakFor := fs.Duration("soak", 0, "soak mode: run one pipeline this long (e.g. 30m) and print its RSS and slope instead")
	soakLoad := fs.Float64("soak-load", 5000, "soak mode: records/s")
	soakEvery := fs.Duration("soak-every", 30*time.Second, "soak mode: how often RSS is printed")
	soakWarmup := fs.Duration("soak-warmup", 5*time.Minute, "soak mode: samples before this are left out of the slope")
	profileDir := fs.String("profile", "", "profile mode: write CPU and allocation profiles of the first pipeline into this directory and print them by component")
	profileLoad := fs.Float64("profile-load", 0, "profile mode: records/s (0: unthrottled, the saturation)")
	profileSeconds := fs.Int("profile-seconds", 20, "profile mode: seconds profiled")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: loomperf takes flags only (-h)", fs.Arg(0))
	}
	if *bin == "" {
		*bin = filepath.Join(*repo, "bin", "otelcol-loom")
	}
	// The collector runs in a directory of its own: the binary's path must
	// not be relative.
	var err error
	if *bin, err = filepath.Abs(*bin); err != nil {
		return err
	}
	if _, err := os.Stat(*bin); err != nil {
		return fmt.Errorf("-bin: %w (build it with make build)", err)
	}
	var selected []pipeline
	for _, name := range strings.Split(*names, ",") {
		p, ok := pipelineNamed(strings.TrimSpace(name))
		if !ok {
			return fmt.Errorf("-pipelines: unknown pipeline %q (want loom, stock or floor)", name)
		}
		selected = append(selected, p)
	}
	loads, err := parseLoads(*loadList)
	if err != nil {
		return err
	}
	switch {
	case *reps < 1:
		return fmt.Errorf("-reps %d: want at least 1", *reps)
	case *window <= 0 || *warmup < 0:
		return fmt.Errorf("-window %s, -warmup %s: want a positive window and a warm-up of 0 or more", *window, *warmup)
	}

	if *soakFor > 0 {
		_, err := soak(*bin, *repo, soakOptions{pipeline: selected[0], load: *soakLoad, duration: *soakFor, every: *soakEvery, warmup: *soakWarmup}, stdout)
		return err
	}
	if *profileDir != "" {
		return profileRun(*bin, *repo, profileOptions{pipeline: selected[0], load: *profileLoad, warmup: *warmup, seconds: *profileSeconds, dir: *profileDir}, stdout)
	}
	opts := options{bin: *bin, repo: *repo, pipelines: selected, loads: loads, reps: *reps, warmup: *warmup, window: *window,
		breakdown: *breakdown, progress: stderr}
	results, err := run(&opts)
	if len(results) > 0 {
		report(stdout, opts, results)
	}
	if err != nil {
		return err
	}
	return complete(opts, results)
}

func parseLoads(list string) ([]float64, error) {
	var loads []float64
	for _, s := range strings.Split(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("-loads: %q is not a rate in records/s (0 for unthrottled), e.g. 5000,10000,0", s)
		}
		loads = append(loads, v)
	}
	return loads, nil
}
