package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// riskloc writes a case: dimensions a (5 values) × b (4) × c (3), real
// within 3% of predict, and the leaves of cause (e.g. "a=a2") at half.
func riskloc(t *testing.T, path, cause string, zipped bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	b.WriteString("a,b,c,real,predict\n")
	for a := 1; a <= 5; a++ {
		for bb := 1; bb <= 4; bb++ {
			for c := 1; c <= 3; c++ {
				predict := 50 + 100*rng.Float64()
				real := predict * (1 + 0.03*rng.NormFloat64())
				terms := map[string]bool{fmt.Sprint("a=a", a): true, fmt.Sprint("b=b", bb): true, fmt.Sprint("c=c", c): true}
				inside := cause != ""
				for _, term := range strings.Split(cause, "&") {
					inside = inside && terms[term]
				}
				if inside {
					real = predict / 2
				}
				fmt.Fprintf(&b, "a%d,b%d,c%d,%.4f,%.4f\n", a, bb, c, real, predict)
			}
		}
	}
	write(t, path, b.String(), zipped)
}

func write(t *testing.T, path, content string, zipped bool) {
	t.Helper()
	data := []byte(content)
	if zipped {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(data); err != nil || zw.Close() != nil {
			t.Fatal("gzip", err)
		}
		data = buf.Bytes()
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func runCmd(args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := run(args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestLocalizeRiskloc(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ file, cause string }{
		{"plain.csv", "a=a2"},
		{"zipped.csv.gz", "b=b3&c=c1"},
		{"none.csv", ""},
	} {
		path := filepath.Join(dir, tc.file)
		riskloc(t, path, tc.cause, strings.HasSuffix(tc.file, ".gz"))
		out, _, err := runCmd("localize", "--format", "riskloc", path)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if got := lastLine(out); got != tc.cause {
			t.Errorf("%s: last line %q, want %q\n%s", tc.file, got, tc.cause, out)
		}
	}
}

func TestLocalizeCounts(t *testing.T) {
	var b strings.Builder
	b.WriteString("min,region,model,value,cnt\n")
	rng := rand.New(rand.NewPCG(3, 4))
	for m := range 11 {
		for r := 1; r <= 3; r++ {
			for md := 1; md <= 3; md++ {
				n := 300
				p := 0.02
				if m == 10 && md == 2 {
					p = 0.3
				}
				failed := 0
				for range n {
					if rng.Float64() < p {
						failed++
					}
				}
				fmt.Fprintf(&b, "%d,r%d,m%d,%d,%d\n", 1_700_000_000+60*m, r, md, failed, n)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "counts.csv")
	write(t, path, b.String(), false)
	out, _, err := runCmd("localize", "--format", "counts", "--at", "1700000600", path)
	if err != nil {
		t.Fatal(err)
	}
	if got := lastLine(out); got != "model=m2" {
		t.Errorf("last line %q, want model=m2\n%s", got, out)
	}
	if _, _, err := runCmd("localize", "--format", "counts", path); err == nil || !strings.Contains(err.Error(), "--at") {
		t.Errorf("counts without --at: %v", err)
	}
	if _, _, err := runCmd("localize", "--format", "counts", "--at", "1700000630", path); err == nil ||
		!strings.Contains(err.Error(), "no row at minute 1700000630 (--at); the file's minutes run from 1700000000 to 1700000600") {
		t.Errorf("--at off the minutes: %v", err)
	}
}

func TestBench(t *testing.T) {
	dir := t.TempDir()
	riskloc(t, filepath.Join(dir, "101.csv.gz"), "a=a2", true)
	riskloc(t, filepath.Join(dir, "102.csv"), "b=b3&c=c1", false)
	write(t, filepath.Join(dir, "injection_info.csv.gz"), "timestamp,set,noise_level\n101,a=a2,0.03\n102,c=c1&b=b3,0.03\n", true)
	out, _, err := runCmd("bench", "-v", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "cases=2 F1=1.000 precision=1.000 recall=1.000 mean_case_F1=1.000 TP=2 FP=0 FN=0") ||
		!strings.Contains(out, "101\tTP=1 FP=0 FN=0") {
		t.Errorf("output:\n%s", out)
	}
	out, _, err = runCmd("bench", "--cases", "1", dir)
	if err != nil || !strings.Contains(out, "cases=1 ") {
		t.Errorf("--cases 1: %v\n%s", err, out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"localize"}, {"bench"}, {"localize", "a.csv", "b.csv"}} {
		if _, _, err := runCmd(args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want the usage", args, err)
		}
	}
	if _, _, err := runCmd("localize", "--format", "json", "x.csv"); err == nil || !strings.Contains(err.Error(), "riskloc or counts") {
		t.Errorf("unknown format: %v", err)
	}
	if _, _, err := runCmd("localize", "/nonexistent/case.csv"); err == nil || !strings.Contains(err.Error(), "/nonexistent/case.csv") {
		t.Errorf("missing file: %v", err)
	}
	if out, _, err := runCmd("help"); err != nil || !strings.Contains(out, "loomrca bench") {
		t.Errorf("help: %v %q", err, out)
	}
}
