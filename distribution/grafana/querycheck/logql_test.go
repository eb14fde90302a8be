package querycheck

import (
	"slices"
	"strings"
	"testing"
)

// Queries from Loki's LogQL documentation (log queries, metric queries,
// parsers, label filters, formatting), and some of Loom's own.
var validLogQL = []string{
	`{container="query-frontend",namespace="loki-dev"} |= "metrics.go" | logfmt | duration > 10s and throughput_mb < 500`,
	`{app="mysql",name="mysql-backup"}`,
	`{name=~"mysql.+"}`,
	`{name!~"mysql.+", env="prod"}`,
	`{job="mysql"} |= "error" != "timeout"`,
	`{job="mysql"} |~ "err(or)?" or "fail"`,
	`{app="x"} |> "<_> level=error <_>"`,
	`{job="nginx"} | pattern "<ip> - - <_> \"<method> <uri> <_>\" <status> <size> <_> \"<agent>\" <_>"`,
	`{job="x"} | regexp "(?P<method>\\w+) (?P<path>[\\w|/]+)"`,
	`{job="x"} | json first_server="servers[0]", ua="request.headers[\"User-Agent\"]"`,
	`{job="x"} | logfmt --strict --keep-empty`,
	`{job="x"} | unpack | line_format "{{.query}} {{.duration}}"`,
	`{job="x"} | label_format dst=src, foo="{{.status}}"`,
	`{job="x"} | drop level, method="GET" | keep namespace`,
	`{job="x"} | decolorize`,
	`{job="x"} | status >= 400 or (method = "GET" , size > 20KB)`,
	`{job="x"} | addr = ip("192.168.4.0/24")`,
	`{job="x"} |= ip("10.0.0.1")`,
	"{job=`x`} |~ `\\d+`",
	`count_over_time({job="mysql"}[5m])`,
	`sum by (host) (rate({job="mysql"} |= "error" != "timeout" | json | duration > 10s [1m]))`,
	`topk(10, sum(rate({region="us-east1"}[5m])) by (name))`,
	`avg_over_time({job="x"} | logfmt | unwrap latency [5m]) by (path)`,
	`quantile_over_time(0.99, {job="x"} | json | unwrap duration(response_time) [1m]) by (method)`,
	`sum(count_over_time({job="x"}[5m] offset 1h)) / sum(count_over_time({job="y"}[5m])) * 100`,
	`sum(rate({app="foo"}[1m])) > bool 10`,
	`sum by (job) (count_over_time({job="a"}[1m])) or on (job) vector(0)`,
	`label_replace(rate({job="api"} |= "err" [1m]), "foo", "$1", "service", "(.*):.*")`,
	`-sum(rate({a="b"}[1m]))`,
	`{service_name=~".+"} | req_id="req-1715234890123-a1b2c3"`,
	`sum by (service_name) (count_over_time({service_name=~".+"} | golden_valid="false" [1m]))`,
}

var invalidLogQL = map[string]string{
	`{}`:                           "label name",
	`{app=~".*"}`:                  "does not match the empty value",
	`{app!="x"}`:                   "does not match the empty value",
	`{app="x"`:                     `expected "}"`,
	`{app=x}`:                      "quoted label value",
	`{app="x"} |= error`:           "quoted filter",
	`{app="x"} |~ "(unclosed"`:     "regular expression",
	`{app="x"}[5m]`:                "range aggregation",
	`count_over_time({app="x"})`:   "log range",
	`sum(rate({app="x"}[5m])`:      `expected ")"`,
	`rate({app="x"}[5])`:           "expected a duration",
	`rate({app="x"}[5x])`:          "neither a number, a duration",
	`sum_over_time({app="x"}[5m])`: "unwrap",
	`count_over_time({a="x"} | unwrap b [5m])`: "no unwrap",
	`topk(sum(rate({a="x"}[5m])))`:             "count",
	`sum({app="x"})`:                           "aggregates a metric query",
	`{a="x"} + {b="y"}`:                        "metric queries only",
	`{a="x"} | json | status >`:                "value to compare",
	`{a="x"} | regexp "(\\w+)"`:                "named capture group",
	`{a="x"} | logfmt --lenient`:               "no flag",
	`{a="x"} | unwrap seconds(d)`:              "no conversion",
	`rat({a="x"}[5m])`:                         "unknown function",
	`{a="x"} |= "unterminated`:                 "unterminated",
	`{a="x"} | line_format a`:                  "quoted template",
	`{a="x"} $`:                                "unexpected",
}

func TestParseLogQL(t *testing.T) {
	checkGrammar(t, "ParseLogQL", func(q string) error { _, err := ParseLogQL(q); return err }, validLogQL, invalidLogQL)
}

// checkGrammar expects parse to accept every valid query and to reject every
// invalid one with an error that says what its map value says.
func checkGrammar(t *testing.T, name string, parse func(string) error, valid []string, invalid map[string]string) {
	t.Helper()
	for _, q := range valid {
		if err := parse(q); err != nil {
			t.Errorf("%s(%s): %v", name, q, err)
		}
	}
	for q, want := range invalid {
		err := parse(q)
		if err == nil {
			t.Errorf("%s(%s) accepted an invalid query", name, q)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("%s(%s) = %v, want an error about %q", name, q, err, want)
		}
	}
}

func TestLogQLNames(t *testing.T) {
	got, err := ParseLogQL(`sum by (gpu_id, nvidia_xid) (count_over_time({service_name=~".+", level="error"} |= "nvidia.xid" | json | nvidia_xid != "" and gpu_id =~ "GPU-.*" [5m]))`)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Metric || !slices.Equal(got.StreamLabels, []string{"level", "service_name"}) ||
		!slices.Equal(got.FilterLabels, []string{"gpu_id", "nvidia_xid"}) || !slices.Equal(got.Parsers, []string{"json"}) ||
		!slices.Equal(got.Grouping, []string{"gpu_id", "nvidia_xid"}) {
		t.Errorf("names: %+v", got)
	}
	logQuery, err := ParseLogQL(`{service_name="model"} | req_id="req-1"`)
	if err != nil || logQuery.Metric {
		t.Errorf("a log query: %+v, %v", logQuery, err)
	}
}

func FuzzParseLogQL(f *testing.F) {
	for _, q := range validLogQL {
		f.Add(q)
	}
	for q := range invalidLogQL {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		first, err := ParseLogQL(q)
		second, err2 := ParseLogQL(q)
		if (err == nil) != (err2 == nil) || err == nil && !slices.Equal(first.FilterLabels, second.FilterLabels) {
			t.Fatalf("two parses of %q disagree", q)
		}
	})
}
