package foundry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/loom-otel/loom/internal/workload"
)

// The family's incidents. Each starts after the warm-up (Config.Warmup).
const (
	// TokPool: the thread pool of one tokenizer replica runs dry; tok/encode
	// goes from ~5 ms to ~300 ms while the request stays under 2 s.
	TokPool workload.Scenario = "tokpool"
	// FieldDrop: a model upgrade stops writing a field that the result store
	// needs; the store then keeps zero segments. Nothing errors.
	FieldDrop workload.Scenario = "fielddrop"
	// StaleTemplate: a stale prompt template revision makes the answers poor;
	// only the judge's grade and score show it.
	StaleTemplate workload.Scenario = "staletmpl"
	// BlackImages: the fast image preset decodes in float16 and returns black
	// images; only the image's luma and blank flag show it.
	BlackImages workload.Scenario = "blackimg"
	// LoraCold: one LoRA adapter is evicted and loaded cold on every request.
	LoraCold workload.Scenario = "loracold"
	// GPUOOM: one GPU runs out of memory mid-decode; the error is written in
	// log text only.
	GPUOOM workload.Scenario = "gpuoom"
	// LateWrite: one result shard turns read-only; the async writer's failure
	// is a plain-text line seconds after the response went out.
	LateWrite workload.Scenario = "latewrite"
	// KVThrash: one engine replica thrashes its KV cache: preemptions and
	// evictions spike, decode slows, some requests are aborted.
	KVThrash workload.Scenario = "kvthrash"
)

// Incidents returns every incident of the family.
func Incidents() []workload.Scenario {
	return []workload.Scenario{TokPool, FieldDrop, StaleTemplate, BlackImages, LoraCold, GPUOOM, LateWrite, KVThrash}
}

// ParseIncidents parses a comma-separated list such as "tokpool,gpuoom";
// "healthy" is traffic without an incident and "all" selects every incident.
func ParseIncidents(list string) ([]workload.Scenario, error) {
	var out []workload.Scenario
	for _, name := range strings.Split(list, ",") {
		s := workload.Scenario(strings.ToLower(strings.TrimSpace(name)))
		switch {
		case s == "all":
			out = append(out, Incidents()...)
		case s == workload.Healthy || slices.Contains(Incidents(), s):
			out = append(out, s)
		case s == "":
		default:
			return nil, fmt.Errorf("unknown foundry incident %q (want healthy, all or %s)", name, incidentList())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no incident given (want healthy, all or %s)", incidentList())
	}
	return out, nil
}

func incidentList() string {
	names := make([]string, 0, len(Incidents()))
	for _, s := range Incidents() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// Config shapes the family's traffic.
type Config struct {
	Incidents []workload.Scenario // mixed into healthy traffic; Healthy alone = no incident
	// Affected is the share of the requests after the warm-up that the
	// selected incidents hit, split evenly between them.
	Affected float64
	// Warmup is how many requests of healthy traffic come before the
	// incidents start; 0 means DefaultWarmup.
	Warmup int
	Seed   uint64 // same seed + same config => same requests, ids and record contents (timestamps aside)
	workload.Pace
}

// DefaultWarmup is the warm-up when Config.Warmup is 0: a fifth of the
// requests, or warmupWithoutCount when only a duration bounds the run.
func DefaultWarmup(p workload.Pace) int {
	if p.Requests > 0 {
		return p.Requests / 5
	}
	return warmupWithoutCount
}

const warmupWithoutCount = 500

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if len(c.Incidents) == 0 {
		return errors.New("foundry: Incidents is empty; use []workload.Scenario{workload.Healthy} for traffic without an incident")
	}
	for _, s := range c.Incidents {
		if s != workload.Healthy && !slices.Contains(Incidents(), s) {
			return fmt.Errorf("foundry: unknown incident %q (want healthy or %s)", s, incidentList())
		}
	}
	if c.Affected < 0 || c.Affected > 1 {
		return fmt.Errorf("foundry: Affected = %v; want a share between 0 and 1, e.g. 0.12", c.Affected)
	}
	if c.Warmup < 0 {
		return fmt.Errorf("foundry: Warmup = %d; want 0 (the default) or more requests", c.Warmup)
	}
	return c.Pace.Validate()
}

// onset is the index of the first request an incident may hit.
func (c Config) onset() int {
	if c.Warmup > 0 {
		return c.Warmup
	}
	return DefaultWarmup(c.Pace)
}

// selected returns the selected incidents, without Healthy and repeats.
func (c Config) selected() []workload.Scenario {
	var out []workload.Scenario
	for _, s := range c.Incidents {
		if s != workload.Healthy && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Run generates the family's traffic for cfg and sends it with workload.Send.
func Run(ctx context.Context, cfg Config, target workload.Target, truth io.Writer) (workload.Summary, error) {
	if err := target.Validate(); err != nil {
		return workload.Summary{}, err
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		return workload.Summary{}, err
	}
	return workload.Send(ctx, g, cfg.Pace, target, truth)
}
