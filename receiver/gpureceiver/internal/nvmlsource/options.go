// Package nvmlsource is the NVML half of the gpu receiver: metrics per GPU,
// MIG device and process, XID errors and memory-high events as log records.
//
// go-nvml needs cgo, so everything that imports it is built only with
// -tags nvml; without the tag Open returns ErrNotBuilt.
package nvmlsource // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/nvmlsource"

import (
	"errors"

	"go.uber.org/zap"

	"github.com/loom-otel/loom/receiver/gpureceiver/internal/metadata"
)

// ErrNotBuilt is returned by Open in a collector built without NVML support.
var ErrNotBuilt = errors.New("this collector was built without NVML support: rebuild it with -tags nvml (needs cgo)")

// Options configures a Source.
type Options struct {
	// MIG reports each MIG device as its own resource when MIG mode is on.
	MIG bool
	// GPM records Hopper GPM activity metrics on GPUs that support them.
	GPM bool
	// XIDEvents makes WatchXID turn XID errors into log records.
	XIDEvents bool
	// MemoryHighRatio, when above 0, makes Scrape return a gpu.memory.high
	// log record each time a device's used/total memory rises to it. It
	// re-arms once the ratio falls below again.
	MemoryHighRatio float64
	// HostName is set as host.name on every resource, of metrics and logs.
	HostName string
	// Telemetry counts failed NVML queries; nil counts nothing.
	Telemetry *metadata.TelemetryBuilder
	// Logger logs failed queries (rate-limited); nil logs nothing.
	Logger *zap.Logger
}
