package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loom-otel/loom/internal/workload"
)

func TestParseFlags(t *testing.T) {
	cfg, target, truth, err := parseFlags([]string{"-protocol", "http", "-scenario", "s1,s3", "-affected", "0.2",
		"-duration", "5s", "-rate", "1000", "-seed", "9", "-truth", "t.jsonl", "-header", "X-Scope-OrgID=a"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := workload.Config{Scenarios: []workload.Scenario{workload.S1, workload.S3}, Affected: 0.2, Duration: 5 * time.Second, Rate: 1000, Seed: 9}
	if !reflect.DeepEqual(cfg, want) || truth != "t.jsonl" {
		t.Fatalf("config %+v, truth %q", cfg, truth)
	}
	if target.Endpoint != "127.0.0.1:4318" || target.Protocol != workload.HTTP || !target.Insecure || target.Headers["X-Scope-OrgID"] != "a" {
		t.Fatalf("target %+v", target)
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
		_, target, _, err := parseFlags(c.args, io.Discard)
		if err != nil || target.Insecure != c.want {
			t.Errorf("%v: Insecure = %v (%v), want %v", c.args, target.Insecure, err, c.want)
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
	} {
		_, _, _, err := parseFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%v: error %v, want one naming %s", c.args, err, c.flag)
		}
	}
}
