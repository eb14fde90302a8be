//go:build !nvml

package nvmlsource // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/nvmlsource"

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// Source is never created in a collector built without NVML support.
type Source struct{}

// Open returns ErrNotBuilt: this collector was built without -tags nvml.
func Open(Options) (*Source, error) { return nil, ErrNotBuilt }

func (*Source) Scrape(*metadata.MetricsBuilder, pcommon.Timestamp) (plog.Logs, error) {
	return plog.NewLogs(), ErrNotBuilt
}

func (*Source) WatchXID(context.Context, func(plog.Logs)) error { return ErrNotBuilt }

func (*Source) DeviceByMinor() map[uint32]string { return nil }

func (*Source) Close() error { return nil }
