package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// fault is one injection of the day's fault list. Its time is in the
// recorded clock (UTC), as the file names and the columns are.
type fault struct {
	Time string `json:"inject_time"` // "2023-01-30 11:51:46"
	Pod  string `json:"inject_pod"`
	Type string `json:"inject_type"`
	time time.Time
}

func (f fault) at(shift int64) time.Time { return f.time.Add(time.Duration(shift)).UTC() }

// minute is a recorded minute, as its files name it ("11_51").
func (f fault) minute() string { return f.time.Format("15_04") }

// day is one recorded day: its minutes (sorted) and faults (in time order).
type day struct {
	dir     string
	minutes []string
	faults  []fault
}

func openDay(dir string) (*day, error) {
	d := &day{dir: dir}
	lists, _ := filepath.Glob(filepath.Join(dir, "*fault_list.json"))
	if len(lists) != 1 {
		return nil, fmt.Errorf("-dir %s: want one *fault_list.json, found %d", dir, len(lists))
	}
	raw, err := os.ReadFile(lists[0])
	if err != nil {
		return nil, err
	}
	// The list is by hour: {"11": [faults], "12": [...]}.
	var byHour map[string][]fault
	if err := json.Unmarshal(raw, &byHour); err != nil {
		return nil, fmt.Errorf("%s: %w", lists[0], err)
	}
	for _, faults := range byHour {
		for _, f := range faults {
			if f.time, err = time.Parse(time.DateTime, f.Time); err != nil {
				return nil, fmt.Errorf("%s: inject_time %q: %w", lists[0], f.Time, err)
			}
			d.faults = append(d.faults, f)
		}
	}
	slices.SortFunc(d.faults, func(a, b fault) int { return a.time.Compare(b.time) })
	files, _ := filepath.Glob(filepath.Join(dir, "trace", "*_trace.csv"))
	for _, f := range files {
		d.minutes = append(d.minutes, strings.TrimSuffix(filepath.Base(f), "_trace.csv"))
	}
	if len(d.minutes) == 0 {
		return nil, fmt.Errorf("-dir %s: no trace/HH_MM_trace.csv files", dir)
	}
	slices.Sort(d.minutes)
	return d, nil
}

// selection is the minutes to replay and the faults within them: every
// minute (n = 0), or the n-th fault's minute and the two after, as recorded.
func (d *day) selection(n int) ([]string, []fault, error) {
	if n == 0 {
		return d.minutes, d.faults, nil
	}
	if n > len(d.faults) {
		return nil, nil, fmt.Errorf("-fault %d: the day has %d faults", n, len(d.faults))
	}
	f := d.faults[n-1]
	at := slices.Index(d.minutes, f.minute())
	if at < 0 {
		return nil, nil, fmt.Errorf("-fault %d: no recorded minute %s", n, f.minute())
	}
	return d.minutes[at:min(at+3, len(d.minutes))], []fault{f}, nil
}

// load reads the spans and log lines of minutes, in time order.
func (d *day) load(minutes []string) (records []record, bad int, err error) {
	for _, m := range minutes {
		for _, part := range []struct {
			path string
			read func(*os.File, *[]record) (int, error)
		}{
			{filepath.Join(d.dir, "trace", m+"_trace.csv"), func(f *os.File, out *[]record) (int, error) { return readSpans(f, out) }},
			{filepath.Join(d.dir, "log", m+"_log.csv"), func(f *os.File, out *[]record) (int, error) { return readLogs(f, out) }},
		} {
			f, err := os.Open(part.path)
			if err != nil {
				return nil, bad, err
			}
			n, err := part.read(f, &records)
			bad += n
			if closeErr := f.Close(); err == nil {
				err = closeErr
			}
			if err != nil {
				return nil, bad, fmt.Errorf("%s: %w", part.path, err)
			}
		}
	}
	slices.SortStableFunc(records, func(a, b record) int { return int(min(max(a.time-b.time, -1), 1)) })
	return records, bad, nil
}

// writeTruth writes each fault with its time as replayed.
func writeTruth(path string, faults []fault, shift int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, x := range faults {
		if err := enc.Encode(map[string]string{"time": x.at(shift).Format(time.RFC3339Nano), "service": serviceOf(x.Pod),
			"pod": x.Pod, "type": x.Type}); err != nil {
			return errors.Join(err, f.Close())
		}
	}
	return f.Close()
}
