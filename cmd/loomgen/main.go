// Command loomgen sends the telemetry of a simulated AI inference service
// (spans and logs over OTLP, from the OpenTelemetry Go SDK), optionally with
// incidents mixed in, and writes the ground truth of every request. Two
// families of workloads: loom (the incidents S1, S2 and S3) and foundry (an
// unlike platform with eight incidents). See README.md.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/internal/workload/foundry"
	"github.com/loom-otel/loom/internal/workload/fuzz"
)

// The families of workloads (-family).
const (
	familyLoom    = "loom"
	familyFoundry = "foundry"
	familyFuzz    = "fuzz"
)

// fuzzRequests places a fuzzed workload's changes when only -duration bounds the run.
const fuzzRequests = 2000

func main() {
	j, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loomgen:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, j, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loomgen:", err)
		os.Exit(1)
	}
}

// job is the run the command line describes: one family's config, where to
// send and where to write the ground truth.
type job struct {
	family  string
	loom    workload.Config // -family loom
	foundry foundry.Config  // -family foundry
	fuzz    fuzz.Config     // -family fuzz
	pace    workload.Pace   // -family fuzz
	target  workload.Target
	truth   string
}

func (j job) send(ctx context.Context, truth io.Writer) (workload.Summary, error) {
	switch j.family {
	case familyFoundry:
		return foundry.Run(ctx, j.foundry, j.target, truth)
	case familyFuzz:
		return fuzz.Run(ctx, j.fuzz, j.pace, j.target, truth)
	}
	return workload.Run(ctx, j.loom, j.target, truth)
}

// run sends j and prints what it sent to stdout.
func run(ctx context.Context, j job, stdout io.Writer) error {
	var (
		truth io.Writer // a nil interface without -truth
		file  *os.File
	)
	if j.truth != "" {
		f, err := os.Create(j.truth)
		if err != nil {
			return fmt.Errorf("-truth: %w", err)
		}
		truth, file = f, f
	}
	sum, err := j.send(ctx, truth)
	fmt.Fprintf(stdout, "requests=%d spans=%d logs=%d elapsed=%s records/s=%.0f\n",
		sum.Requests, sum.Spans, sum.Logs, sum.Elapsed.Round(time.Millisecond), sum.RecordsPerSecond)
	if err != nil {
		err = fmt.Errorf("sending to %s over %s (check -endpoint, -protocol, -insecure): %w", j.target.Endpoint, j.target.Protocol, err)
	}
	if file != nil {
		err = errors.Join(err, file.Close())
	}
	return err
}

// parseFlags turns the command line into a run; every error names the flag and the fix.
func parseFlags(args []string, output io.Writer) (job, error) {
	fs := flag.NewFlagSet("loomgen", flag.ContinueOnError)
	fs.SetOutput(output)
	endpoint := fs.String("endpoint", "", "OTLP receiver host:port (default 127.0.0.1:4317 for grpc, 127.0.0.1:4318 for http)")
	protocol := fs.String("protocol", "grpc", "OTLP transport: grpc or http")
	insecure := fs.Bool("insecure", true, "plaintext instead of TLS; when not given: true for a loopback -endpoint, false otherwise")
	headers := map[string]string{}
	fs.Func("header", "extra export header key=value, e.g. X-Scope-OrgID=team-a (repeatable)", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		headers[k] = v
		return nil
	})
	family := fs.String("family", familyLoom, "workload family: loom (today's traffic, incidents S1-S3), foundry (an unlike platform, eight incidents) "+
		"or fuzz (a topology, names, record shapes, benign changes and one incident drawn from -seed)")
	scenarios := fs.String("scenario", "healthy", "comma-separated incidents of the family mixed into healthy traffic; loom: healthy,s1,s2,s3,hotinputs; "+
		"foundry: healthy,all,tokpool,fielddrop,staletmpl,blackimg,loracold,gpuoom,latewrite,kvthrash; fuzz: random or one incident class")
	affected := fs.Float64("affected", 0.12, "share of requests hit by the selected incident(s), 0 to 1 (foundry: of the requests after -warmup)")
	warmup := fs.Int("warmup", 0, "foundry: requests of healthy traffic before the incidents start (0 = a fifth of -requests, or 500)")
	requests := fs.Int("requests", 0, "stop after this many requests (0 = no limit)")
	duration := fs.Duration("duration", 0, "stop after this long, e.g. 30s (0 = no limit)")
	rate := fs.Float64("rate", 0, "target records (spans+logs) per second (0 = as fast as possible)")
	seed := fs.Uint64("seed", 1, "same seed and flags => same requests, ids and record contents")
	truth := fs.String("truth", "", "write the ground truth, one JSON object per request, to this file")
	if err := fs.Parse(args); err != nil {
		return job{}, err
	}
	fail := func(format string, a ...any) (job, error) { return job{}, fmt.Errorf(format, a...) }
	if fs.NArg() > 0 {
		return fail("unexpected argument %q: loomgen takes flags only (see -h)", fs.Arg(0))
	}

	target := workload.Target{Endpoint: *endpoint, Protocol: workload.Protocol(*protocol), Insecure: *insecure, Headers: headers}
	switch target.Protocol {
	case workload.GRPC:
		if target.Endpoint == "" {
			target.Endpoint = "127.0.0.1:4317"
		}
	case workload.HTTP:
		if target.Endpoint == "" {
			target.Endpoint = "127.0.0.1:4318"
		}
	default:
		return fail("-protocol %q: want grpc or http", *protocol)
	}
	if err := target.Validate(); err != nil {
		return fail("-endpoint %q: want host:port, e.g. 127.0.0.1:4317", target.Endpoint)
	}
	if !flagGiven(fs, "insecure") {
		target.Insecure = workload.IsLoopback(target.Endpoint)
	}

	var (
		list []workload.Scenario
		err  error
	)
	switch *family {
	case familyLoom:
		list, err = workload.ParseScenarios(*scenarios)
		if flagGiven(fs, "warmup") {
			return fail("-warmup: the loom family's onsets are fixed (S1 after 5%% of the requests); -warmup goes with -family foundry")
		}
	case familyFoundry:
		list, err = foundry.ParseIncidents(*scenarios)
	case familyFuzz:
		var incident workload.Scenario
		if *scenarios != "healthy" {
			incident, err = fuzz.ParseIncident(*scenarios)
		}
		list = []workload.Scenario{incident}
		if flagGiven(fs, "warmup") || flagGiven(fs, "affected") {
			return fail("-warmup and -affected: a fuzzed workload draws its incident's onset and share from -seed; leave them out with -family fuzz")
		}
	default:
		return fail("-family %q: want loom, foundry or fuzz", *family)
	}
	if err != nil {
		return fail("-scenario: %v", err)
	}
	switch {
	case *affected < 0 || *affected > 1:
		return fail("-affected %v: want a share between 0 and 1, e.g. 0.12", *affected)
	case *requests < 0:
		return fail("-requests %d: want 0 (no limit) or more", *requests)
	case *duration < 0:
		return fail("-duration %v: want 0 (no limit) or more, e.g. 30s", *duration)
	case *requests == 0 && *duration == 0:
		return fail("set -requests or -duration, e.g. -requests 1000 or -duration 30s; otherwise the run never ends")
	case *rate < 0:
		return fail("-rate %v: want 0 (as fast as possible) or a positive number of records per second", *rate)
	case *warmup < 0:
		return fail("-warmup %d: want 0 (the default) or more requests", *warmup)
	}
	j := job{family: *family, target: target, truth: *truth}
	pace := workload.Pace{Requests: *requests, Duration: *duration, Rate: *rate}
	switch j.family {
	case familyFoundry:
		j.foundry = foundry.Config{Incidents: list, Affected: *affected, Warmup: *warmup, Seed: *seed, Pace: pace}
		err = j.foundry.Validate()
	case familyFuzz:
		j.fuzz, j.pace = fuzz.Config{Seed: *seed, Requests: cmp.Or(*requests, fuzzRequests), Incident: list[0]}, pace
	default:
		j.loom = workload.Config{Scenarios: list, Affected: *affected, Requests: *requests, Duration: *duration, Rate: *rate, Seed: *seed}
		err = j.loom.Validate()
	}
	if err != nil {
		return fail("%v", err)
	}
	return j, nil
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
