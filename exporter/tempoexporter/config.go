package tempoexporter

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/loom-otel/loom/internal/tenant"
)

// Config is the tempo exporter's configuration: the OTLP gRPC exporter's keys,
// an optional http block for OTLP/HTTP instead, and tenant routing. Queue,
// retry and timeout apply to the whole batch, before it is split by tenant.
type Config struct {
	TimeoutConfig exporterhelper.TimeoutConfig                             `mapstructure:",squash"`
	QueueConfig   configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	RetryConfig   configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`
	// ClientConfig is OTLP/gRPC, the default transport.
	ClientConfig configgrpc.ClientConfig `mapstructure:",squash"`
	// HTTP selects OTLP/HTTP instead of gRPC; leave endpoint empty then.
	HTTP   configoptional.Optional[confighttp.ClientConfig] `mapstructure:"http"`
	Tenant TenantConfig                                     `mapstructure:"tenant"`

	_ struct{}
}

// TenantConfig routes spans to tenants, each with its own OTLP client.
type TenantConfig struct {
	tenant.Config `mapstructure:",squash"`
	// MaxClients bounds the open tenant clients; beyond it the least recently
	// used one is closed (and reopened on its tenant's next span).
	MaxClients int `mapstructure:"max_clients"`

	_ struct{}
}

var (
	_ component.Config  = (*Config)(nil)
	_ confmap.Validator = (*Config)(nil)
)

// Validate requires exactly one transport and checks the tenant block; each
// error names the key in the collector's a::b form and says the fix.
func (c *Config) Validate() error {
	var errs []error
	switch {
	case c.HTTP.HasValue() && c.ClientConfig.Endpoint != "":
		errs = append(errs, errors.New(`endpoint and http: set only one, endpoint for OTLP/gRPC or http::endpoint for OTLP/HTTP`))
	case c.HTTP.HasValue() && c.HTTP.Get().Endpoint == "":
		errs = append(errs, errors.New(`http::endpoint: set Tempo's OTLP/HTTP address, e.g. "http://tempo:4318"`))
	case !c.HTTP.HasValue() && c.ClientConfig.Endpoint == "":
		errs = append(errs, errors.New(`endpoint: set Tempo's OTLP/gRPC address, e.g. "tempo:4317" (or http::endpoint for OTLP/HTTP)`))
	}
	if err := c.Tenant.Check("tenant"); err != nil {
		errs = append(errs, err)
	}
	if err := c.Tenant.CheckBatching("tenant", c.QueueConfig); err != nil {
		errs = append(errs, err)
	}
	if c.Tenant.MaxClients <= 0 {
		errs = append(errs, errors.New("tenant::max_clients: must be positive, e.g. 100"))
	}
	return errors.Join(errs...)
}
