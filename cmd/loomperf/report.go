package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
)

const mib = 1 << 20

// report writes the results as Markdown: every run, the medians per
// pipeline and load, their ratios, and loom's memory breakdown.
func report(w io.Writer, opts options, results []result) {
	fmt.Fprintf(w, "\n## loomperf: %d pipelines x %d loads x %d repetitions\n\n", len(opts.pipelines), len(opts.loads), opts.reps)
	fmt.Fprintf(w, "The load generator runs in this process, on the same %d cores as the collector: its CPU is not in the\n", runtime.NumCPU())
	fmt.Fprintf(w, "collector's figures, but it competes with the collector for the cores (most at \"unthrottled\").\n")
	fmt.Fprintf(w, "Workload: loomgen's S1, S2 and S3 at 12%%, OTLP/gRPC, %d requests (~450 records) per export, %d exports in flight.\n", batchRequests, senders)
	fmt.Fprintf(w, "Each run: a fresh collector, %s of load before %s measured. CPU: the collector's utime+stime over the window\n", opts.warmup, opts.window)
	fmt.Fprintf(w, "per 10 000 records accepted; peak RSS: VmHWM; end RSS: VmRSS at the end of the window.\n")
	if opts.loadAvg[0] != "" {
		fmt.Fprintf(w, "Load average of the machine (other work shares it too): %s before, %s after.\n", opts.loadAvg[0], opts.loadAvg[1])
	}
	fmt.Fprintln(w)
	for _, p := range opts.pipelines {
		fmt.Fprintf(w, "- %s: %s\n", p.name, p.about)
	}

	fmt.Fprintf(w, "\n### Every run\n\n")
	fmt.Fprintf(w, "| pipeline | load | rep | CPU s / 10k records | peak RSS MiB | end RSS MiB | records/s accepted | refused (client) | refused (collector) | failed exports |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %s | %d | %.3f | %.0f | %.0f | %.0f | %d | %.0f | %d |\n", r.pipeline, loadName(r.load), r.rep,
			r.cpuPer10k(), float64(r.mem.peak)/mib, float64(r.mem.rss)/mib, r.throughput(), r.refusedClient, r.refusedCollector, r.failedExports)
	}

	fmt.Fprintf(w, "\n### Medians of the repetitions (min-max)\n\n")
	fmt.Fprintf(w, "| load | pipeline | CPU s / 10k records | peak RSS MiB | end RSS MiB | records/s accepted | refused records |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|\n")
	for _, load := range opts.loads {
		for _, p := range opts.pipelines {
			runs := runsOf(results, p.name, load)
			if len(runs) == 0 {
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", loadName(load), p.name,
				spread(runs, "%.3f", result.cpuPer10k),
				spread(runs, "%.0f", func(r result) float64 { return float64(r.mem.peak) / mib }),
				spread(runs, "%.0f", func(r result) float64 { return float64(r.mem.rss) / mib }),
				spread(runs, "%.0f", result.throughput),
				spread(runs, "%.0f", func(r result) float64 { return float64(r.refusedClient) }))
		}
	}
	ratios(w, opts, results)
	breakdowns(w, opts, results)
}

// ratios compares the medians: loom against stock and the floor, stock
// against the floor; throughput only where the load is unthrottled.
func ratios(w io.Writer, opts options, results []result) {
	pairs := [][2]string{{"loom", "stock"}, {"loom", "floor"}, {"stock", "floor"}}
	fmt.Fprintf(w, "\n### Ratios of the medians\n\n| load | measure |")
	for _, pair := range pairs {
		fmt.Fprintf(w, " %s ÷ %s |", pair[0], pair[1])
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(pairs)))
	measures := []struct {
		name        string
		value       func(result) float64
		unthrottled bool
	}{
		{"CPU per 10k records", result.cpuPer10k, false},
		{"peak RSS", func(r result) float64 { return float64(r.mem.peak) }, false},
		{"throughput", result.throughput, true},
	}
	for _, load := range opts.loads {
		for _, m := range measures {
			if m.unthrottled && load != 0 {
				continue
			}
			fmt.Fprintf(w, "| %s | %s |", loadName(load), m.name)
			for _, pair := range pairs {
				a, b := runsOf(results, pair[0], load), runsOf(results, pair[1], load)
				if len(a) == 0 || len(b) == 0 {
					fmt.Fprintf(w, " |")
					continue
				}
				fmt.Fprintf(w, " %.2f |", median(a, m.value)/median(b, m.value))
			}
			fmt.Fprintln(w)
		}
	}
}

// breakdowns prints where loom's memory is, per load (the last
// repetition's): the runtime's view and the top of the Go heap.
func breakdowns(w io.Writer, opts options, results []result) {
	var last []result
	for _, load := range opts.loads {
		runs := runsOf(results, "loom", load)
		if len(runs) > 0 && runs[len(runs)-1].breakdown != nil {
			last = append(last, runs[len(runs)-1])
		}
	}
	if len(last) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Loom's memory at the end of the window (last repetition)\n\n")
	for _, r := range last {
		printBreakdown(w, loadName(r.load), r.breakdown)
	}
}

// printBreakdown prints the runtime's view of a process's memory and the
// top of its Go heap in use.
func printBreakdown(w io.Writer, when string, b *breakdown) {
	fmt.Fprintf(w, "%s: RSS %.0f MiB: %.0f MiB mapped from files (the binary's text and data, shared and reclaimable) and %.0f MiB anonymous, "+
		"of which the Go runtime holds (Sys) %.0f MiB and at least %.0f MiB is outside it (mostly the embedded store's page caches); heap alloc %.0f MiB, in use (profile) %.0f MiB.\n",
		when, b.rss/mib, b.fileBacked()/mib, b.anon/mib, b.goSys/mib, b.outsideGo()/mib, b.heapAlloc/mib, float64(b.inuseTotal)/mib)
	fmt.Fprintf(w, "\n| Go heap in use by component (leafmost component frame) | MiB | share | | by allocating package | MiB | share |\n|---|---|---|---|---|---|---|\n")
	for i := range min(12, max(len(b.inuseByComponent), len(b.inuseByPackage))) {
		fmt.Fprintf(w, "| %s | | %s |\n", shareCells(b.inuseByComponent, i, b.inuseTotal), shareCells(b.inuseByPackage, i, b.inuseTotal))
	}
	fmt.Fprintln(w)
}

func shareCells(shares []share, i int, total int64) string {
	if i >= len(shares) || total == 0 {
		return " | |"
	}
	return fmt.Sprintf("%s | %.1f | %.0f%%", shares[i].name, float64(shares[i].value)/mib, 100*float64(shares[i].value)/float64(total))
}

func runsOf(results []result, pipeline string, load float64) []result {
	var out []result
	for _, r := range results {
		if r.pipeline == pipeline && r.load == load {
			out = append(out, r)
		}
	}
	return out
}

func median(runs []result, value func(result) float64) float64 {
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = value(r)
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// spread is "median (min-max)", or the value alone for one run.
func spread(runs []result, format string, value func(result) float64) string {
	m := fmt.Sprintf(format, median(runs, value))
	if len(runs) == 1 {
		return m
	}
	lo, hi := value(runs[0]), value(runs[0])
	for _, r := range runs[1:] {
		lo, hi = min(lo, value(r)), max(hi, value(r))
	}
	return fmt.Sprintf("%s (%s-%s)", m, fmt.Sprintf(format, lo), fmt.Sprintf(format, hi))
}

// complete checks that every pipeline ran at every load in every
// repetition and accepted records: what the smoke test asserts (never
// machine speed).
func complete(opts options, results []result) error {
	var missing []string
	for rep := 1; rep <= opts.reps; rep++ {
		for _, load := range opts.loads {
			for _, p := range opts.pipelines {
				found := false
				for _, r := range results {
					if r.pipeline == p.name && r.load == load && r.rep == rep && r.accepted > 0 {
						found = true
					}
				}
				if !found {
					missing = append(missing, fmt.Sprintf("%s at %s rep %d", p.name, loadName(load), rep))
				}
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no accepted records for: %s", strings.Join(missing, ", "))
	}
	return nil
}
