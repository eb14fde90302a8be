// Package rcabench reads the rcabench data (../shared/rcabench: leaf rows with
// real and predict amounts, per-minute counts, and the injection_info ground
// truth), scores root-cause sets exactly as the benchmark says, and runs a
// whole folder.
package rcabench

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/loom-otel/loom/internal/rootcause"
)

// Open opens a CSV file, gzip-compressed or plain (told by its first bytes,
// not its name).
func Open(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 1<<16)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", path, err), f.Close())
		}
		return readCloser{gz, func() error { return errors.Join(gz.Close(), f.Close()) }}, nil
	}
	return readCloser{br, f.Close}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (rc readCloser) Close() error { return rc.close() }

// ReadLeaves reads one case in the riskloc format: a header naming the
// columns, real and predict among them, every other column a dimension; one
// leaf per row. name is the file's name in errors.
func ReadLeaves(r io.Reader, name string) ([]rootcause.Leaf, error) {
	t, err := newTable(r, name, "real", "predict")
	if err != nil {
		return nil, err
	}
	var leaves []rootcause.Leaf
	for t.next() {
		real, predict := t.number(0), t.number(1)
		if t.err != nil {
			break
		}
		leaves = append(leaves, rootcause.Leaf{Terms: t.terms(), Real: real, Predict: predict})
	}
	return leaves, t.err
}

// ReadCounts reads one case in the counts format: min (unix seconds of the
// minute), value and cnt, every other column a dimension; one row per leaf
// and minute in which the leaf was observed.
func ReadCounts(r io.Reader, name string) ([]rootcause.CountRow, error) {
	t, err := newTable(r, name, "min", "value", "cnt")
	if err != nil {
		return nil, err
	}
	var rows []rootcause.CountRow
	for t.next() {
		minute := t.integer(0)
		value, count := t.number(1), t.number(2)
		if t.err != nil {
			break
		}
		switch {
		case value < 0:
			t.fail(t.measures[1], fmt.Errorf("a negative count %g", value))
		case count < 0:
			t.fail(t.measures[2], fmt.Errorf("a negative count %g", count))
		case value > count:
			t.fail(t.measures[1], fmt.Errorf("value %g exceeds cnt %g", value, count))
		}
		if t.err != nil {
			break
		}
		rows = append(rows, rootcause.CountRow{Minute: minute, Terms: t.terms(), Value: value, Count: count})
	}
	return rows, t.err
}

// Truth is one case of injection_info: its id, root-cause set and, where
// the file has an at column, the anomalous minute of a counts case.
type Truth struct {
	ID, Set, At string
}

// ReadTruth reads injection_info.csv: the timestamp column (the case id),
// the set column and an optional at column; the others are ignored.
func ReadTruth(r io.Reader, name string) ([]Truth, error) {
	t, err := newTable(r, name, "timestamp", "set")
	if err != nil {
		return nil, err
	}
	at := slices.Index(t.header, "at")
	var cases []Truth
	for t.next() {
		tr := Truth{ID: t.record[t.measures[0]], Set: t.record[t.measures[1]]}
		if at >= 0 {
			tr.At = t.record[at]
		}
		cases = append(cases, tr)
	}
	return cases, t.err
}

// table reads a CSV with a header: the named measure columns, and every
// other column a dimension.
type table struct {
	name     string
	cr       *csv.Reader
	header   []string
	measures []int // column of each named measure
	dims     []int // the other columns
	record   []string
	interned []map[string]string // per dimension column
	err      error
}

func newTable(r io.Reader, name string, measures ...string) (*table, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file, expected a header with %v", name, measures)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &table{name: name, cr: cr, header: slices.Clone(header)}
	t.measures = make([]int, len(measures))
	for i, m := range measures {
		t.measures[i] = -1
		for c, h := range t.header {
			if h == m {
				t.measures[i] = c
			}
		}
		if t.measures[i] < 0 {
			return nil, fmt.Errorf("%s:1: no %q column in the header %q", name, m, t.header)
		}
	}
	for c, h := range t.header {
		isMeasure := false
		for _, m := range t.measures {
			isMeasure = isMeasure || m == c
		}
		if isMeasure {
			continue
		}
		if h == "" {
			return nil, fmt.Errorf("%s:1:%d: a dimension column without a name", name, c+1)
		}
		t.dims = append(t.dims, c)
		t.interned = append(t.interned, map[string]string{})
	}
	return t, nil
}

func (t *table) next() bool {
	if t.err != nil {
		return false
	}
	rec, err := t.cr.Read()
	if errors.Is(err, io.EOF) {
		return false
	}
	if err != nil {
		t.err = fmt.Errorf("%s: %w", t.name, err)
		return false
	}
	t.record = rec
	return true
}

func (t *table) fail(col int, err error) {
	if t.err != nil {
		return
	}
	line, column := t.cr.FieldPos(col)
	t.err = fmt.Errorf("%s:%d:%d: column %q: %w", t.name, line, column, t.header[col], err)
}

// number parses measure i as a finite float.
func (t *table) number(i int) float64 {
	col := t.measures[i]
	v, err := strconv.ParseFloat(t.record[col], 64)
	switch {
	case err != nil:
		t.fail(col, fmt.Errorf("not a number: %q", t.record[col]))
	case math.IsNaN(v) || math.Abs(v) > maxAmount:
		t.fail(col, fmt.Errorf("%q is out of range (|x| <= %g)", t.record[col], maxAmount))
	}
	return v
}

// maxAmount bounds amounts far above any count, so that sums stay finite.
const maxAmount = 1e15

func (t *table) integer(i int) int64 {
	col := t.measures[i]
	v, err := strconv.ParseInt(t.record[col], 10, 64)
	if err != nil {
		t.fail(col, fmt.Errorf("not an integer: %q", t.record[col]))
	}
	return v
}

func (t *table) terms() []rootcause.Term {
	terms := make([]rootcause.Term, len(t.dims))
	for i, c := range t.dims {
		v := t.record[c]
		s, ok := t.interned[i][v]
		if !ok {
			s = strings.Clone(v) // not a slice of the whole line
			t.interned[i][v] = s
		}
		terms[i] = rootcause.Term{Dim: t.header[c], Value: s}
	}
	return terms
}
