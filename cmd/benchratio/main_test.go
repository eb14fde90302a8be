package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkConsumeLogs/baseline-transform-2   	    1000	      2000 ns/op	  10.00 allocs/record	     500 B/op
BenchmarkConsumeLogs/goldenfield-2          	    2000	      1000 ns/op	   2.00 allocs/record	     100 B/op
BenchmarkTraced/baseline-untraced-2         	    1000	       200 ns/op
BenchmarkTraced/strace-2                    	    1000	     80000 ns/op
BenchmarkAlone-2                            	     100	       123 ns/op
PASS
`

func TestRatios(t *testing.T) {
	results, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 5 {
		t.Fatalf("parsed %d results, want 5", len(results))
	}
	var out strings.Builder
	report(&out, results)
	want := "BenchmarkConsumeLogs/goldenfield vs baseline-transform: 2.00x  allocs/record=2 (baseline 10)"
	if !strings.Contains(out.String(), want) {
		t.Fatalf("report:\n%s\nwant a line %q", out.String(), want)
	}
	slower := "BenchmarkTraced/strace vs baseline-untraced: 0.00x (400× the baseline's time, +7.98e+04 ns/op)"
	if !strings.Contains(out.String(), slower) {
		t.Fatalf("report:\n%s\nwant a line %q", out.String(), slower)
	}
	if strings.Contains(out.String(), "BenchmarkAlone") {
		t.Fatal("a family without a baseline has no ratio to print")
	}
}

const hooks = `BenchmarkHook/baseline-untraced-2      	1000	200 ns/op
BenchmarkHook/floor-tracepoint-2       	1000	400 ns/op
BenchmarkHook/traced-tracepoint-2      	1000	500 ns/op
BenchmarkHook/traced-raw-tracepoint-2  	1000	900 ns/op
BenchmarkHook/baseline-untraced-2      	1000	100 ns/op
BenchmarkHook/floor-tracepoint-2       	1000	300 ns/op
BenchmarkHook/traced-tracepoint-2      	1000	600 ns/op
BenchmarkHook/traced-raw-tracepoint-2  	1000	900 ns/op
`

// TestFloorsAndRepetitions: a variant is compared with the floor of its
// hook as well as with the baseline, each from the same repetition.
func TestFloorsAndRepetitions(t *testing.T) {
	results, err := parse(strings.NewReader(hooks))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	report(&out, results)
	for _, want := range []string{
		"BenchmarkHook/traced-tracepoint vs baseline-untraced: 0.40x (2.5× the baseline's time, +300 ns/op); vs floor-tracepoint: 1.25× the floor's time (+100 ns/op)",
		"BenchmarkHook/traced-tracepoint vs baseline-untraced: 0.17x (6× the baseline's time, +500 ns/op); vs floor-tracepoint: 2× the floor's time (+300 ns/op)",
		"BenchmarkHook/floor-tracepoint vs baseline-untraced: 0.50x (2× the baseline's time, +200 ns/op)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report:\n%s\nwant a line %q", out.String(), want)
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "traced-raw-tracepoint") && strings.Contains(line, "floor") {
			t.Errorf("%q: a variant without a floor of its own hook gets none", line)
		}
	}
}
