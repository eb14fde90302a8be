//go:build !linux || !amd64

package ioctltrace // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"

// Tracer is not available on this platform.
type Tracer struct{}

// Start returns ErrUnsupported.
func Start(Options, func(Event)) (*Tracer, error) { return nil, ErrUnsupported }

func (*Tracer) Stats() ([]Stat, error)        { return nil, ErrUnsupported }
func (*Tracer) Lost() (uint64, uint64, error) { return 0, 0, ErrUnsupported }
func (*Tracer) Attach() Attach                { return AttachAuto }
func (*Tracer) Layouts() Layouts              { return Layouts{} }
func (*Tracer) Close() error                  { return nil }

func (*Tracer) Refresh() (int, []string, error) { return 0, nil, ErrUnsupported }
func (*Tracer) Missing() []string               { return nil }
