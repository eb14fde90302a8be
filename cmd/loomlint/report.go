package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// coverageFlag is field=share pairs, e.g. req_id=0.9,stage=0.5.
type coverageFlag map[string]float64

func (c *coverageFlag) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*c)) {
		parts = append(parts, k+"="+strconv.FormatFloat((*c)[k], 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}

func (c *coverageFlag) Set(s string) error {
	next := coverageFlag{}
	for _, pair := range strings.Split(s, ",") {
		field, share, ok := strings.Cut(strings.TrimSpace(pair), "=")
		v, err := strconv.ParseFloat(share, 64)
		if !ok || err != nil || v < 0 || v > 1 || !slices.Contains(goldenFields, field) {
			return fmt.Errorf("%q: want field=share with share in 0..1 and field one of %s", pair, strings.Join(goldenFields, ", "))
		}
		next[field] = v
	}
	*c = next
	return nil
}

// thresholds are what a sample must meet; each applies per service.
type thresholds struct {
	MinCoverage   coverageFlag `json:"min_coverage"`
	MaxNoise      float64      `json:"max_noise"`
	MaxRawPrompts int          `json:"max_raw_prompts"`
}

// defaultThresholds: nearly every record can be found by req_id, at most
// four records failing validation per valid one, and no raw prompt.
func defaultThresholds() thresholds {
	return thresholds{MinCoverage: coverageFlag{"req_id": 0.9}, MaxNoise: 4, MaxRawPrompts: 0}
}

// report is what loomlint prints.
type report struct {
	Records    int             `json:"records"`
	Services   []serviceReport `json:"services"`
	Thresholds thresholds      `json:"thresholds"`
	Failures   []string        `json:"failures"`
}

type serviceReport struct {
	Service string `json:"service"`
	stats
	Coverage   map[string]float64 `json:"coverage"`
	NoiseRatio float64            `json:"noise_ratio"`
	Stages     []stageReport      `json:"stages"`
}

type stageReport struct {
	Stage string `json:"stage"`
	stats
	Coverage map[string]float64 `json:"coverage"`
}

func coverage(s *stats) map[string]float64 {
	out := map[string]float64{}
	for _, f := range goldenFields {
		out[f] = float64(s.Present[f]) / float64(max(s.Records, 1))
	}
	return out
}

func (s *stats) addAll(o *stats) {
	s.Records += o.Records
	s.Valid += o.Valid
	s.RawPrompts += o.RawPrompts
	for _, m := range [][2]map[string]int{{s.Present, o.Present}, {s.Missing, o.Missing}, {s.Invalid, o.Invalid}} {
		for k, v := range m[1] {
			m[0][k] += v
		}
	}
}

func (l *linter) report(th thresholds) report {
	rep := report{Thresholds: th, Failures: []string{}}
	byService := map[string][]groupKey{}
	for k := range l.groups {
		byService[k.Service] = append(byService[k.Service], k)
	}
	for _, service := range slices.Sorted(maps.Keys(byService)) {
		keys := byService[service]
		slices.SortFunc(keys, func(a, b groupKey) int { return cmp.Compare(a.Stage, b.Stage) })
		sr := serviceReport{Service: service, stats: stats{Present: map[string]int{}, Missing: map[string]int{}, Invalid: map[string]int{}}}
		for _, k := range keys {
			st := l.groups[k]
			sr.addAll(st)
			sr.Stages = append(sr.Stages, stageReport{Stage: k.Stage, stats: *st, Coverage: coverage(st)})
		}
		sr.Coverage = coverage(&sr.stats)
		// as the processor's log-noise ratio: records failing validation ÷ valid records
		sr.NoiseRatio = float64(sr.Records-sr.Valid) / float64(max(sr.Valid, 1))
		rep.Records += sr.Records
		rep.Services = append(rep.Services, sr)
		for _, f := range slices.Sorted(maps.Keys(th.MinCoverage)) {
			if sr.Coverage[f] < th.MinCoverage[f] {
				rep.Failures = append(rep.Failures, fmt.Sprintf("%s: %s on %.1f%% of records, below %.1f%% (-min-coverage)", service, f, 100*sr.Coverage[f], 100*th.MinCoverage[f]))
			}
		}
		if sr.NoiseRatio > th.MaxNoise {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: noise ratio %.2f above %.2f (-max-noise): %d of %d records fail validation", service, sr.NoiseRatio, th.MaxNoise, sr.Records-sr.Valid, sr.Records))
		}
		if sr.RawPrompts > th.MaxRawPrompts {
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: %d records carry raw prompts, above %d (-max-raw-prompts); log input_hash instead", service, sr.RawPrompts, th.MaxRawPrompts))
		}
	}
	if rep.Records == 0 {
		rep.Failures = append(rep.Failures, errNoRecords.Error()+" in the sample")
	}
	return rep
}

func (r report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r report) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "service\tstage\trecords\t%s\tvalid\tinvalid values\traw prompts\n", strings.Join(goldenFields, "\t"))
	row := func(service, stage string, s *stats, cov map[string]float64) {
		cells := []string{service, stage, strconv.Itoa(s.Records)}
		for _, f := range goldenFields {
			cells = append(cells, fmt.Sprintf("%.0f%%", 100*cov[f]))
		}
		cells = append(cells, fmt.Sprintf("%.0f%%", 100*float64(s.Valid)/float64(max(s.Records, 1))), counts(s.Invalid), strconv.Itoa(s.RawPrompts))
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	for _, sr := range r.Services {
		for _, st := range sr.Stages {
			row(sr.Service, cmp.Or(st.Stage, "(no stage)"), &st.stats, st.Coverage)
		}
		row(sr.Service, "all", &sr.stats, sr.Coverage)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, sr := range r.Services {
		fmt.Fprintf(w, "%s: noise ratio %.2f (records failing validation ÷ valid); most missing: %s\n", sr.Service, sr.NoiseRatio, counts(sr.Missing))
	}
	if len(r.Failures) == 0 {
		_, err := fmt.Fprintf(w, "PASS: %d records meet the thresholds\n", r.Records)
		return err
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAIL: %s\n", f)
	}
	return nil
}

// counts writes the largest counts first: "stage 12, req_id 3".
func counts(m map[string]int) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
