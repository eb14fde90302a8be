// Command benchratio reads `go test -bench` output on stdin and prints, for
// each benchmark family, every variant's speed relative to the family's
// baseline, measured side by side in the same run. These machines are noisy:
// ratios are what the project compares, not absolute times.
//
// A family is a top-level benchmark; its baseline is the sub-benchmark whose
// name starts with "baseline" (e.g. BenchmarkConsumeLogs/baseline-transform
// beside BenchmarkConsumeLogs/goldenfield). A family may also have floors:
// a sub-benchmark "floor-X" is the second reference of every "<name>-X" (e.g.
// traced-tracepoint against floor-tracepoint, an empty program on the same
// hook). With -count, the n-th run of a variant is compared with the n-th
// run of its references, measured next to it.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

type result struct {
	family, variant string
	metrics         map[string]float64 // unit -> value, e.g. "ns/op", "allocs/op", "records/s"
}

var benchLine = regexp.MustCompile(`^(Benchmark[^\s/]+)(?:/(\S+?))?(?:-\d+)?\s+\d+\s+(.*)$`)

func parse(r io.Reader) ([]result, error) {
	var results []result
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		m := benchLine.FindStringSubmatch(scanner.Text())
		if m == nil {
			continue
		}
		res := result{family: m[1], variant: m[2], metrics: map[string]float64{}}
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				res.metrics[fields[i+1]] = v
			}
		}
		results = append(results, res)
	}
	return results, scanner.Err()
}

func report(w io.Writer, results []result) {
	families := map[string][]result{}
	var order []string
	for _, r := range results {
		if _, seen := families[r.family]; !seen {
			order = append(order, r.family)
		}
		families[r.family] = append(families[r.family], r)
	}
	sort.Strings(order)
	fmt.Fprintln(w, "benchmark ratios (baseline ns/op ÷ variant ns/op; > 1 means faster than the baseline)")
	for _, family := range order {
		runs := map[string][]result{} // variant -> its runs, in order
		var baseline string
		for _, r := range families[family] {
			runs[r.variant] = append(runs[r.variant], r)
			if baseline == "" && strings.HasPrefix(r.variant, "baseline") {
				baseline = r.variant
			}
		}
		if baseline == "" {
			continue
		}
		seen := map[string]int{}
		for _, r := range families[family] {
			n := seen[r.variant]
			seen[r.variant]++
			if strings.HasPrefix(r.variant, "baseline") {
				continue
			}
			base := nth(runs[baseline], n)
			speed := base.metrics["ns/op"] / r.metrics["ns/op"]
			line := fmt.Sprintf("%s/%s vs %s: %.2fx", family, r.variant, baseline, speed)
			if speed < 1 {
				line += slowdown(base, r)
			}
			if _, hook, ok := strings.Cut(r.variant, "-"); ok && !strings.HasPrefix(r.variant, "floor-") {
				if floors := runs["floor-"+hook]; len(floors) > 0 {
					floor := nth(floors, n)
					line += fmt.Sprintf("; vs floor-%s: %.3g× the floor's time (+%.4g ns/op)", hook,
						r.metrics["ns/op"]/floor.metrics["ns/op"], r.metrics["ns/op"]-floor.metrics["ns/op"])
				}
			}
			for _, unit := range []string{"allocs/record", "B/record", "records/s"} {
				if v, ok := r.metrics[unit]; ok {
					line += fmt.Sprintf("  %s=%.4g (baseline %.4g)", unit, v, base.metrics[unit])
				}
			}
			fmt.Fprintln(w, line)
		}
	}
}

// nth is the n-th run of a reference, or its last when it ran fewer times.
func nth(runs []result, n int) result { return runs[min(n, len(runs)-1)] }

// slowdown reads better as a multiple of the baseline's time.
func slowdown(base, r result) string {
	return fmt.Sprintf(" (%.3g× the baseline's time, +%.4g ns/op)", r.metrics["ns/op"]/base.metrics["ns/op"], r.metrics["ns/op"]-base.metrics["ns/op"])
}

func main() {
	results, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	report(os.Stdout, results)
}
