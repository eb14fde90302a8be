// Command benchratio reads `go test -bench` output on stdin and prints, for
// each benchmark family, every variant's speed relative to the family's
// baseline, measured side by side in the same run. These machines are noisy:
// ratios are what the project compares, not absolute times.
//
// A family is a top-level benchmark; its baseline is the sub-benchmark whose
// name starts with "baseline" (e.g. BenchmarkConsumeLogs/baseline-transform
// beside BenchmarkConsumeLogs/goldenfield).
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
		var baseline *result
		for i, r := range families[family] {
			if strings.HasPrefix(r.variant, "baseline") {
				baseline = &families[family][i]
				break
			}
		}
		for _, r := range families[family] {
			if baseline == nil || strings.HasPrefix(r.variant, "baseline") {
				continue
			}
			speed := baseline.metrics["ns/op"] / r.metrics["ns/op"]
			line := fmt.Sprintf("%s/%s vs %s: %.2fx", family, r.variant, baseline.variant, speed)
			if speed < 1 {
				// A slowdown reads better as a multiple of the baseline's time.
				line += fmt.Sprintf(" (%.3g× the baseline's time, +%.4g ns/op)", 1/speed, r.metrics["ns/op"]-baseline.metrics["ns/op"])
			}
			for _, unit := range []string{"allocs/record", "B/record", "records/s"} {
				if v, ok := r.metrics[unit]; ok {
					line += fmt.Sprintf("  %s=%.4g (baseline %.4g)", unit, v, baseline.metrics[unit])
				}
			}
			fmt.Fprintln(w, line)
		}
	}
}

func main() {
	results, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	report(os.Stdout, results)
}
