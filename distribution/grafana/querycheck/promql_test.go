package querycheck

import (
	"slices"
	"strings"
	"testing"
)

func TestPromQLMetrics(t *testing.T) {
	for q, want := range map[string][]string{
		`sum by (policy, outcome) (rate(otelcol_processor_reqsampling_decisions[5m]))`:                                    {"otelcol_processor_reqsampling_decisions"},
		`histogram_quantile(0.99, sum by (le) (rate(nvidia_ioctl_duration_seconds_bucket{nvidia_ioctl_escape!=""}[1m])))`: {"nvidia_ioctl_duration_seconds_bucket"},
		`a / on (job) group_left (x) b offset 5m`:                                                                         {"a", "b"},
		`{__name__="hw_power_watts", host_name="n"} > bool 300`:                                                           {"hw_power_watts"},
		`sum(rate(x:recorded[5m:1m])) without (instance) or vector(0)`:                                                    {"x:recorded"},
		`count(up == 1) and inf > nan`:                                                                                    {"up"},
	} {
		got, err := PromQLMetrics(q)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("PromQLMetrics(%s) = %v, %v; want %v", q, got, err, want)
		}
	}
	for _, q := range []string{`sum(rate(x[5m])`, `x]`, `x{a="b"`, `x{a="b}`} {
		if _, err := PromQLMetrics(q); err == nil {
			t.Errorf("PromQLMetrics(%s) accepted unbalanced brackets or strings", q)
		}
	}
}

func FuzzPromQLMetrics(f *testing.F) {
	f.Add(`sum by (a) (rate(x{b="c"}[5m])) / on (a) y`)
	f.Add(`{__name__="x"}`)
	f.Fuzz(func(t *testing.T, q string) {
		names, err := PromQLMetrics(q)
		for _, name := range names {
			if err == nil && name == "" && !strings.Contains(q, `__name__`) {
				t.Fatalf("PromQLMetrics(%q) returned an empty name", q)
			}
		}
	})
}
