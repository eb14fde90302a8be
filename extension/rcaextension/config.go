package rcaextension

import (
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
)

// Config configures the rca extension.
type Config struct {
	// ServerConfig is the page's and the API's HTTP server: loopback by
	// default; add tls and auth (any authenticator extension) to serve it
	// beyond this host.
	Server confighttp.ServerConfig `mapstructure:",squash"`
	// Graph is the eventgraph exporter whose graph is read.
	Graph component.ID `mapstructure:"graph"`
	// Sampler is the reqsampling processor whose input_hash failure map is shown.
	Sampler component.ID `mapstructure:"sampler"`
	// Window is how far back the page looks when a view names no window.
	Window time.Duration `mapstructure:"window"`
	// MaxWindow bounds the window a query may ask for.
	MaxWindow time.Duration `mapstructure:"max_window"`
	// MaxRequests bounds the failing requests a view lists.
	MaxRequests int `mapstructure:"max_requests"`
	// RootCause tunes the root-cause ranking.
	RootCause RootCauseConfig `mapstructure:"root_cause"`

	_ struct{}
}

// RootCauseConfig tunes the root-cause ranking. Its dimensions are
// discovered from the data: the golden fields, service.name, host.name and
// every attribute the eventgraph exporter found to have few values.
type RootCauseConfig struct {
	// Include, when set, ranks only these dimensions (attribute names as on
	// the records, input_hash.prefix for the input family).
	Include []string `mapstructure:"include"`
	// Exclude never ranks these dimensions.
	Exclude []string `mapstructure:"exclude"`
	// MaxEvents bounds the events one ranking reads; a window holding more
	// is ranked on its first max_events events and says so.
	MaxEvents int `mapstructure:"max_events"`
	// InputHashPrefix is the hex digits of input_hash that name an input
	// family (as reqsampling's learning.prefix_length).
	InputHashPrefix int `mapstructure:"input_hash_prefix"`
}

// Validate names the key to fix.
func (c *Config) Validate() error {
	var errs []error
	if c.Graph.Type().String() == "" {
		errs = append(errs, errors.New("graph: name the eventgraph exporter whose graph this page reads, e.g. eventgraph"))
	}
	if c.Window <= 0 {
		errs = append(errs, errors.New("window: must be positive, e.g. 15m"))
	}
	if c.MaxWindow < c.Window {
		errs = append(errs, errors.New("max_window: must be at least window"))
	}
	if c.MaxRequests <= 0 {
		errs = append(errs, errors.New("max_requests: must be positive, e.g. 200"))
	}
	if c.RootCause.MaxEvents < 1 {
		errs = append(errs, errors.New("root_cause::max_events: must be positive, e.g. 1000000"))
	}
	if c.RootCause.InputHashPrefix < 1 || c.RootCause.InputHashPrefix > 8 {
		errs = append(errs, errors.New("root_cause::input_hash_prefix: must be 1 to 8 hex digits, e.g. 2"))
	}
	return errors.Join(errs...)
}
