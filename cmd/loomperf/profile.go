package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// profileOptions are a profile run's: one pipeline at one load, profiled
// from the running collector's pprof endpoint.
type profileOptions struct {
	pipeline pipeline
	load     float64
	warmup   time.Duration
	seconds  int
	dir      string // where cpu.pb.gz and allocs.pb.gz are written
}

// profileRun profiles the collector for opts.seconds under load: a CPU
// profile and a delta heap profile (what was allocated meanwhile) at the
// same time. It prints CPU by component, and bytes and allocations per
// record by component; the profiles stay in opts.dir for go tool pprof.
func profileRun(bin, repo string, opts profileOptions, w io.Writer) (err error) {
	cfg, err := opts.pipeline.config(repo)
	if err != nil {
		return err
	}
	c, err := startCollector(bin, cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.stop()) }()
	l, err := startLoad(c.otlp, opts.load, 1)
	if err != nil {
		return err
	}
	defer l.stop()
	if err := c.wait(opts.warmup); err != nil {
		return err
	}
	if err := os.MkdirAll(opts.dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(opts.seconds+60)*time.Second)
	defer cancel()
	accepted0 := l.accepted.Load()
	var (
		wg          sync.WaitGroup
		cpu, allocs *profile.Profile
		cpuErr      error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		cpu, cpuErr = fetchProfile(ctx, c, fmt.Sprintf("profile?seconds=%d", opts.seconds), filepath.Join(opts.dir, "cpu.pb.gz"))
	}()
	allocs, err = fetchProfile(ctx, c, fmt.Sprintf("heap?seconds=%d", opts.seconds), filepath.Join(opts.dir, "allocs.pb.gz"))
	wg.Wait()
	if err = errors.Join(err, cpuErr); err != nil {
		return err
	}
	records := float64(l.accepted.Load() - accepted0)
	if records == 0 {
		return fmt.Errorf("the collector accepted nothing while it was profiled (first export error: %w)", l.err())
	}

	fmt.Fprintf(w, "\n## loomperf profile: %s at %s, %d s (%.0f records/s accepted; the load generator shares the cores)\n\n",
		opts.pipeline.name, loadName(opts.load), opts.seconds, records/float64(opts.seconds))
	byComponent, byPackage, total, err := attribute(cpu, "cpu")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "CPU by component (leafmost component frame) and by the package of the running function:\n\n")
	fmt.Fprintf(w, "| component | CPU | | function's package | CPU |\n|---|---|---|---|---|\n")
	for i := range min(20, max(len(byComponent), len(byPackage))) {
		fmt.Fprintf(w, "| %s | | %s |\n", percentCells(byComponent, i, total), percentCells(byPackage, i, total))
	}
	bytesBy, _, _, err := attribute(allocs, "alloc_space")
	if err != nil {
		return err
	}
	objectsBy, _, _, err := attribute(allocs, "alloc_objects")
	if err != nil {
		return err
	}
	objects := map[string]int64{}
	for _, s := range objectsBy {
		objects[s.name] = s.value
	}
	fmt.Fprintf(w, "\nAllocations per accepted record, by component (heap profile sampling: estimates):\n\n")
	fmt.Fprintf(w, "| component | bytes / record | allocations / record |\n|---|---|---|\n")
	for _, s := range bytesBy[:min(15, len(bytesBy))] {
		fmt.Fprintf(w, "| %s | %.0f | %.1f |\n", s.name, float64(s.value)/records, float64(objects[s.name])/records)
	}
	fmt.Fprintf(w, "\nProfiles: %s, %s (go tool pprof -top -nodecount 40 FILE)\n",
		filepath.Join(opts.dir, "cpu.pb.gz"), filepath.Join(opts.dir, "allocs.pb.gz"))
	return nil
}

func percentCells(shares []share, i int, total int64) string {
	if i >= len(shares) || total == 0 {
		return " |"
	}
	return fmt.Sprintf("%s | %.1f%%", shares[i].name, 100*float64(shares[i].value)/float64(total))
}

// fetchProfile gets /debug/pprof/<query> from the collector, keeps it at
// path and parses it.
func fetchProfile(ctx context.Context, c *collector, query, path string) (*profile.Profile, error) {
	body, err := httpGet(ctx, "http://"+c.pprof+"/debug/pprof/"+query)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, body); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	f, err = os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return profile.Parse(f)
}
