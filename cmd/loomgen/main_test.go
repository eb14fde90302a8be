package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/internal/workload/foundry"
	"github.com/loom-otel/loom/internal/workload/fuzz"
)

func TestParseFlags(t *testing.T) {
	j, err := parseFlags([]string{"-protocol", "http", "-scenario", "s1,s3", "-affected", "0.2",
		"-duration", "5s", "-rate", "1000", "-seed", "9", "-truth", "t.jsonl", "-header", "X-Scope-OrgID=a"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg, target := j.loom, j.target
	want := workload.Config{Scenarios: []workload.Scenario{workload.S1, workload.S3}, Affected: 0.2, Duration: 5 * time.Second, Rate: 1000, Seed: 9}
	if j.family != familyLoom || !reflect.DeepEqual(cfg, want) || j.truth != "t.jsonl" {
		t.Fatalf("family %s, config %+v, truth %q", j.family, cfg, j.truth)
	}
	if target.Endpoint != "127.0.0.1:4318" || target.Protocol != workload.HTTP || !target.Insecure || target.Headers["X-Scope-OrgID"] != "a" {
		t.Fatalf("target %+v", target)
	}
}

func TestParseFoundryFlags(t *testing.T) {
	j, err := parseFlags([]string{"-family", "foundry", "-scenario", "tokpool,latewrite", "-affected", "0.3", "-warmup", "40",
		"-requests", "900", "-seed", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := foundry.Config{Incidents: []workload.Scenario{foundry.TokPool, foundry.LateWrite}, Affected: 0.3, Warmup: 40, Seed: 4,
		Pace: workload.Pace{Requests: 900}}
	if j.family != familyFoundry || !reflect.DeepEqual(j.foundry, want) {
		t.Fatalf("family %s, config %+v", j.family, j.foundry)
	}
	all, err := parseFlags([]string{"-family", "foundry", "-scenario", "all", "-duration", "1s"}, io.Discard)
	if err != nil || !reflect.DeepEqual(all.foundry.Incidents, foundry.Incidents()) {
		t.Fatalf("-scenario all: %v (%v)", all.foundry.Incidents, err)
	}
}

func TestParseFuzzFlags(t *testing.T) {
	j, err := parseFlags([]string{"-family", "fuzz", "-scenario", "score_drop", "-requests", "700", "-seed", "9"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := fuzz.Config{Seed: 9, Requests: 700, Incident: fuzz.ScoreDrop}
	if j.family != familyFuzz || j.fuzz != want || j.pace.Requests != 700 {
		t.Fatalf("family %s, config %+v, pace %+v", j.family, j.fuzz, j.pace)
	}
	drawn, err := parseFlags([]string{"-family", "fuzz", "-duration", "1s"}, io.Discard)
	if err != nil || drawn.fuzz.Incident != "" || drawn.fuzz.Requests != fuzzRequests {
		t.Fatalf("a drawn incident over a duration: %+v (%v)", drawn.fuzz, err)
	}
	for _, args := range [][]string{
		{"-family", "fuzz", "-requests", "1", "-scenario", "tokpool"},
		{"-family", "fuzz", "-requests", "1", "-affected", "0.3"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

func TestInsecureDefault(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"-requests", "1"}, true},
		{[]string{"-requests", "1", "-endpoint", "collector:4317"}, false},
		{[]string{"-requests", "1", "-endpoint", "collector:4317", "-insecure"}, true},
		{[]string{"-requests", "1", "-insecure=false"}, false},
	} {
		j, err := parseFlags(c.args, io.Discard)
		if err != nil || j.target.Insecure != c.want {
			t.Errorf("%v: Insecure = %v (%v), want %v", c.args, j.target.Insecure, err, c.want)
		}
	}
}

func TestParseFlagsErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{nil, "-requests"},
		{[]string{"-requests", "1", "-protocol", "udp"}, "-protocol"},
		{[]string{"-requests", "1", "-endpoint", "nohost"}, "-endpoint"},
		{[]string{"-requests", "1", "-scenario", "s9"}, "-scenario"},
		{[]string{"-requests", "1", "-affected", "2"}, "-affected"},
		{[]string{"-requests", "-3"}, "-requests"},
		{[]string{"-duration", "-1s"}, "-duration"},
		{[]string{"-requests", "1", "-rate", "-5"}, "-rate"},
		{[]string{"-requests", "1", "stray"}, "flags only"},
		{[]string{"-requests", "1", "-header", "novalue"}, "-header"},
		{[]string{"-requests", "1", "-family", "acme"}, "-family"},
		{[]string{"-requests", "1", "-warmup", "10"}, "-warmup"},
		{[]string{"-requests", "1", "-family", "foundry", "-warmup", "-1"}, "-warmup"},
		{[]string{"-requests", "1", "-family", "foundry", "-scenario", "s1"}, "-scenario"},
		{[]string{"-requests", "1", "-family", "loom", "-scenario", "tokpool"}, "-scenario"},
	} {
		_, err := parseFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%v: error %v, want one naming %s", c.args, err, c.flag)
		}
	}
}
