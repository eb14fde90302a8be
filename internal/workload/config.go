// Package workload generates realistic telemetry of an AI inference service
// (gateway → auth → preproc → model → postproc → cache → async workers, plus
// celery batch tasks) and sends it over OTLP with the OpenTelemetry Go SDK.
//
// The request model (Generator) is pure and deterministic from Config.Seed; the
// emitter (Run, or Send for any Source of requests, such as another family of
// workloads) turns each modelled request into SDK spans and log records and
// writes one ground-truth line (Truth) per request. The incidents S1, S2 and S3
// are those of shared/scenarios/README.md.
package workload

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Scenario names an incident mixed into healthy traffic.
type Scenario string

const (
	Healthy Scenario = "healthy"
	S1      Scenario = "s1" // model upgrade silently drops raw_output_hash
	S2      Scenario = "s2" // emoji-heavy input family (input_hash prefix "f7") makes model/forward slow
	S3      Scenario = "s3" // celery worker host with 8 workers and 1 GPU: tasks die and time out
)

// ParseScenarios parses a comma-separated list such as "s1,s3".
func ParseScenarios(list string) ([]Scenario, error) {
	var out []Scenario
	for _, name := range strings.Split(list, ",") {
		s := Scenario(strings.ToLower(strings.TrimSpace(name)))
		switch s {
		case Healthy, S1, S2, S3, HotInputs:
			out = append(out, s)
		case "":
		default:
			return nil, fmt.Errorf("unknown scenario %q (want healthy, s1, s2, s3 or hotinputs)", name)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scenario given (want healthy, s1, s2 or s3)")
	}
	return out, nil
}

// Config shapes the generated traffic.
type Config struct {
	Scenarios []Scenario    // scenarios mixed into healthy traffic (Healthy alone = no incident)
	Affected  float64       // share of requests affected by the selected scenario(s), e.g. 0.12
	Requests  int           // stop after this many requests (0 = no limit)
	Duration  time.Duration // stop after this long (0 = no limit); at least one of Requests/Duration must be set
	Rate      float64       // target records (spans+logs) per second; 0 = as fast as possible
	Seed      uint64        // same seed + same config => same requests, ids and record contents (timestamps aside)
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if len(c.Scenarios) == 0 {
		return errors.New("workload: Scenarios is empty; use []Scenario{Healthy} for traffic without an incident")
	}
	for _, s := range c.Scenarios {
		switch s {
		case Healthy, S1, S2, S3, HotInputs:
		default:
			return fmt.Errorf("workload: unknown scenario %q (want healthy, s1, s2, s3 or hotinputs)", s)
		}
	}
	if c.Affected < 0 || c.Affected > 1 {
		return fmt.Errorf("workload: Affected = %v; want a share between 0 and 1, e.g. 0.12", c.Affected)
	}
	return c.Pace().Validate()
}

// Pace is how long the run lasts and how fast it sends.
func (c Config) Pace() Pace { return Pace{Requests: c.Requests, Duration: c.Duration, Rate: c.Rate} }

// Pace bounds and paces a run of any request source (see Send).
type Pace struct {
	Requests int           // stop after this many requests (0 = no limit)
	Duration time.Duration // stop after this long (0 = no limit); at least one of Requests/Duration must be set
	Rate     float64       // target records (spans+logs) per second; 0 = as fast as possible
}

// Validate reports the first problem with p.
func (p Pace) Validate() error {
	if p.Requests < 0 {
		return fmt.Errorf("workload: Requests = %d; want 0 (no limit) or more", p.Requests)
	}
	if p.Duration < 0 {
		return fmt.Errorf("workload: Duration = %v; want 0 (no limit) or more", p.Duration)
	}
	if p.Requests == 0 && p.Duration == 0 {
		return errors.New("workload: set Requests or Duration (or both); otherwise the run never ends")
	}
	if p.Rate < 0 {
		return fmt.Errorf("workload: Rate = %v; want 0 (as fast as possible) or a positive records/s", p.Rate)
	}
	return nil
}

// incidents returns the selected scenarios other than Healthy, without repeats.
func (c Config) incidents() []Scenario {
	var out []Scenario
	for _, s := range c.Scenarios {
		if s != Healthy && !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func contains(list []Scenario, s Scenario) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Protocol is the OTLP transport: "grpc" or "http".
type Protocol string

const (
	GRPC Protocol = "grpc"
	HTTP Protocol = "http"
)

// Target is where Run sends OTLP.
type Target struct {
	Endpoint string // host:port, e.g. 127.0.0.1:4317
	Protocol Protocol
	Insecure bool // plaintext (default true for the CLI when the endpoint is loopback)
	Headers  map[string]string
}

// Validate reports the first problem with t.
func (t Target) Validate() error {
	if t.Protocol != GRPC && t.Protocol != HTTP {
		return fmt.Errorf("workload: Protocol = %q; want %q or %q", t.Protocol, GRPC, HTTP)
	}
	if _, _, err := net.SplitHostPort(t.Endpoint); err != nil {
		return fmt.Errorf("workload: Endpoint = %q is not host:port (e.g. 127.0.0.1:4317): %w", t.Endpoint, err)
	}
	return nil
}

// IsLoopback reports whether endpoint (host:port) names this machine.
func IsLoopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
