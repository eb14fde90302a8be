package foundry

import (
	"context"
	"io"

	"github.com/loom-otel/loom/internal/workload"
)

// Config shapes the family's traffic.
type Config struct {
	Seed uint64 // same seed + same config => same requests, ids and record contents (timestamps aside)
	workload.Pace
}

// Validate reports the first problem with c.
func (c Config) Validate() error { return c.Pace.Validate() }

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
