package rcabench

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/loom-otel/loom/internal/rootcause"
)

// Format is the shape of a case file.
type Format string

const (
	// Riskloc cases hold one row per leaf with real and predict amounts.
	Riskloc Format = "riskloc"
	// Counts cases hold per-minute value and cnt counts per leaf; the
	// anomaly is at one minute and the minutes before it are the baseline.
	Counts Format = "counts"
)

// ParseFormat accepts the names of the formats.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Riskloc, Counts:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q (riskloc or counts)", s)
}

// Localized is one case's answer and how long the algorithm took, reading
// the file excluded (as RiskLoc's run.py times it): wall clock, and the
// process's CPU time, which does not grow when other jobs share the machine.
type Localized struct {
	Candidates []rootcause.Candidate
	Elapsed    time.Duration
	CPU        time.Duration
}

// LocalizeFile reads one case and localizes its root causes. at is the
// anomalous minute of a Counts case (unix seconds) and unused for Riskloc.
func LocalizeFile(path string, format Format, at int64, opts rootcause.Options) (Localized, error) {
	f, err := Open(path)
	if err != nil {
		return Localized{}, err
	}
	defer f.Close()
	var leaves []rootcause.Leaf
	var rows []rootcause.CountRow
	if format == Counts {
		rows, err = ReadCounts(f, path)
	} else {
		leaves, err = ReadLeaves(f, path)
	}
	if err != nil {
		return Localized{}, err
	}
	start, startCPU := time.Now(), cpuTime()
	if format == Counts {
		if leaves, err = rootcause.FromCounts(rows, at); err != nil {
			return Localized{}, fmt.Errorf("%s: %w", path, err)
		}
		if len(leaves) == 0 && len(rows) > 0 {
			first, last := minutes(rows)
			return Localized{}, fmt.Errorf("%s: no row at minute %d (--at); the file's minutes run from %d to %d", path, at, first, last)
		}
	}
	cands, err := rootcause.Localize(leaves, opts)
	if err != nil {
		return Localized{}, fmt.Errorf("%s: %w", path, err)
	}
	return Localized{Candidates: cands, Elapsed: time.Since(start), CPU: cpuTime() - startCPU}, nil
}

// minutes is the first and last minute of rows (not empty).
func minutes(rows []rootcause.CountRow) (first, last int64) {
	first, last = rows[0].Minute, rows[0].Minute
	for _, r := range rows {
		first, last = min(first, r.Minute), max(last, r.Minute)
	}
	return first, last
}

// CaseResult is one scored case.
type CaseResult struct {
	ID            string
	Truth, Answer Set
	Tally         Tally
	Elapsed, CPU  time.Duration
}

// Report is a scored folder.
type Report struct {
	Cases []CaseResult
	// Tally sums the cases' tallies: its F1 is the benchmark's
	// micro-averaged F1.
	Tally Tally
}

// MeanF1 is the plain mean of the per-case F1.
func (r Report) MeanF1() float64 {
	if len(r.Cases) == 0 {
		return 0
	}
	s := 0.0
	for _, c := range r.Cases {
		s += c.Tally.F1()
	}
	return s / float64(len(r.Cases))
}

// Seconds are the mean and largest wall-clock time per case.
func (r Report) Seconds() (mean, maxSeconds float64) {
	return r.seconds(func(c CaseResult) time.Duration { return c.Elapsed })
}

// CPUSeconds are the mean and largest CPU time per case.
func (r Report) CPUSeconds() (mean, maxSeconds float64) {
	return r.seconds(func(c CaseResult) time.Duration { return c.CPU })
}

func (r Report) seconds(of func(CaseResult) time.Duration) (mean, maxSeconds float64) {
	for _, c := range r.Cases {
		s := of(c).Seconds()
		mean += s
		maxSeconds = max(maxSeconds, s)
	}
	if len(r.Cases) > 0 {
		mean /= float64(len(r.Cases))
	}
	return mean, maxSeconds
}

// Bench localizes and scores every case of a folder: injection_info.csv[.gz]
// names the cases (timestamp, the file name without .csv[.gz]) and their
// true sets; for Counts the anomalous minute is the at column, or else the
// timestamp. limit > 0 keeps the first
// limit cases. progress, if not nil, sees each case as it is scored.
func Bench(dir string, format Format, opts rootcause.Options, limit int, progress func(CaseResult)) (Report, error) {
	infoPath, err := findCase(dir, "injection_info")
	if err != nil {
		return Report{}, err
	}
	f, err := Open(infoPath)
	if err != nil {
		return Report{}, err
	}
	truths, err := ReadTruth(f, infoPath)
	f.Close()
	if err != nil {
		return Report{}, err
	}
	if limit > 0 && limit < len(truths) {
		truths = truths[:limit]
	}
	var rep Report
	for _, tr := range truths {
		path, err := findCase(dir, tr.ID)
		if err != nil {
			return rep, err
		}
		var at int64
		if format == Counts {
			minute := cmp.Or(tr.At, tr.ID)
			if at, err = strconv.ParseInt(minute, 10, 64); err != nil {
				return rep, fmt.Errorf("%s: case %s: %q is not the anomalous minute in unix seconds (the at column, or else timestamp)", infoPath, tr.ID, minute)
			}
		}
		loc, err := LocalizeFile(path, format, at, opts)
		if err != nil {
			return rep, err
		}
		res := CaseResult{ID: tr.ID, Truth: ParseSet(tr.Set), Answer: SetOf(loc.Candidates), Elapsed: loc.Elapsed, CPU: loc.CPU}
		res.Tally = Score(res.Truth, res.Answer)
		rep.Cases = append(rep.Cases, res)
		rep.Tally = rep.Tally.Add(res.Tally)
		if progress != nil {
			progress(res)
		}
	}
	return rep, nil
}

// findCase is dir/name.csv.gz or dir/name.csv.
func findCase(dir, name string) (string, error) {
	for _, ext := range []string{".csv.gz", ".csv"} {
		p := filepath.Join(dir, name+ext)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s: no %s.csv.gz or %s.csv", dir, name, name)
}
