package eventgraphexporter

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// Config is the eventgraph exporter's configuration.
type Config struct {
	// Timeout bounds each write to the graph.
	TimeoutConfig exporterhelper.TimeoutConfig                             `mapstructure:",squash"`
	QueueConfig   configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	RetryConfig   configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`

	// Backend is embedded (a SQLite file, the default) or neo4j.
	Backend  Backend        `mapstructure:"backend"`
	Embedded EmbeddedConfig `mapstructure:"embedded"`
	Neo4j    Neo4jConfig    `mapstructure:"neo4j"`
	// MaxPropertyBytes bounds every text property (message, req_id, ...):
	// longer values are cut at a UTF-8 boundary and counted.
	MaxPropertyBytes int `mapstructure:"max_property_bytes"`

	_ struct{}
}

// Backend names where the graph is written.
type Backend string

const (
	BackendEmbedded Backend = "embedded"
	BackendNeo4j    Backend = "neo4j"
)

// EmbeddedConfig configures the single-file store.
type EmbeddedConfig struct {
	// Path is the database file; its directory is created when missing.
	Path      string          `mapstructure:"path"`
	Retention RetentionConfig `mapstructure:"retention"`

	_ struct{}
}

// RetentionConfig bounds what the embedded store keeps; 0 disables a bound.
type RetentionConfig struct {
	// MaxAge: events older than this are deleted.
	MaxAge time.Duration `mapstructure:"max_age"`
	// MaxBytes: the oldest events are deleted until the file's used pages fit.
	MaxBytes int64 `mapstructure:"max_bytes"`
	// CheckInterval is how often the bounds are applied.
	CheckInterval time.Duration `mapstructure:"check_interval"`

	_ struct{}
}

// Neo4jConfig configures the Neo4j (or Bolt-compatible) backend.
type Neo4jConfig struct {
	// URI is the Bolt address; the scheme chooses encryption: bolt:// and
	// neo4j:// are plaintext, +s verifies the server, +ssc trusts any certificate.
	URI      string              `mapstructure:"uri"`
	Username string              `mapstructure:"username"`
	Password configopaque.String `mapstructure:"password"`
	// Database is the database name; empty: the server's default database.
	Database string `mapstructure:"database"`
	// TLS adds CA and client certificates to an encrypted scheme.
	TLS   configtls.ClientConfig `mapstructure:"tls"`
	Batch BatchConfig            `mapstructure:"batch"`

	_ struct{}
}

// BatchConfig bounds the batches written to Neo4j: concurrent pushes are
// written together until MaxRows events or MaxWait, and every transaction
// holds at most MaxRows events.
type BatchConfig struct {
	MaxRows int           `mapstructure:"max_rows"`
	MaxWait time.Duration `mapstructure:"max_wait"`

	_ struct{}
}

var (
	_ component.Config  = (*Config)(nil)
	_ confmap.Validator = (*Config)(nil)
)

// Limits of the settings.
const (
	// Neo4j's range indexes hold keys up to about 8 KB; req_id and the dimension values are indexed.
	maxPropertyBytesLimit = 8000
	minPropertyBytes      = 64
	maxBatchRows          = 100_000
	maxBatchWait          = time.Minute
)

// Validate checks the configuration; each error names the key and the fix.
func (c *Config) Validate() error {
	var errs []error
	switch c.Backend {
	case BackendEmbedded:
		errs = append(errs, c.Embedded.validate()...)
	case BackendNeo4j:
		errs = append(errs, c.Neo4j.validate()...)
	default:
		errs = append(errs, fmt.Errorf(`backend: %q is not supported; use "embedded" (a local file) or "neo4j"`, c.Backend))
	}
	if c.MaxPropertyBytes < minPropertyBytes || c.MaxPropertyBytes > maxPropertyBytesLimit {
		errs = append(errs, fmt.Errorf("max_property_bytes: %d is out of range; use %d to %d (Neo4j indexes keys up to 8 KB), default 4096",
			c.MaxPropertyBytes, minPropertyBytes, maxPropertyBytesLimit))
	}
	if c.TimeoutConfig.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout: %v; set a positive duration that bounds one write, e.g. 30s", c.TimeoutConfig.Timeout))
	}
	return errors.Join(errs...)
}

func (e *EmbeddedConfig) validate() []error {
	var errs []error
	if e.Path == "" || strings.ContainsAny(e.Path, "?#") {
		errs = append(errs, fmt.Errorf(`embedded::path: %q; set a file name without "?" or "#", e.g. ./data/loom-graph.db`, e.Path))
	}
	r := e.Retention
	if r.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("embedded::retention::max_age: %v; use 0 (keep forever) or a positive duration, e.g. 24h", r.MaxAge))
	}
	if r.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("embedded::retention::max_bytes: %d; use 0 (no bound) or a size in bytes, e.g. 1073741824", r.MaxBytes))
	}
	if (r.MaxAge > 0 || r.MaxBytes > 0) && r.CheckInterval <= 0 {
		errs = append(errs, fmt.Errorf("embedded::retention::check_interval: %v; set a positive interval when a bound is set, e.g. 1m", r.CheckInterval))
	}
	return errs
}

// boltSchemes are the URI schemes of the Go driver; +s and +ssc are encrypted.
var boltSchemes = map[string]bool{
	"bolt": false, "bolt+s": true, "bolt+ssc": true,
	"neo4j": false, "neo4j+s": true, "neo4j+ssc": true,
}

func (n *Neo4jConfig) validate() []error {
	var errs []error
	u, err := url.Parse(n.URI)
	encrypted, known := false, false
	if err == nil {
		encrypted, known = boltSchemes[u.Scheme]
	}
	if !known || u.Host == "" {
		errs = append(errs, fmt.Errorf(`neo4j::uri: %q is not a Bolt URI; set e.g. "bolt://127.0.0.1:7687" (or bolt+s://, neo4j://, neo4j+s://)`, n.URI))
	} else if !encrypted && hasTLSMaterial(n.TLS) {
		errs = append(errs, fmt.Errorf("neo4j::tls: certificates are set but neo4j::uri %q is plaintext; use the %s+s:// scheme", n.URI, u.Scheme))
	}
	if n.Username == "" {
		errs = append(errs, errors.New(`neo4j::username: empty; set the database user, e.g. "neo4j"`))
	}
	if n.Batch.MaxRows < 1 || n.Batch.MaxRows > maxBatchRows {
		errs = append(errs, fmt.Errorf("neo4j::batch::max_rows: %d; use 1 to %d events per transaction, default 1000", n.Batch.MaxRows, maxBatchRows))
	}
	if n.Batch.MaxWait < 0 || n.Batch.MaxWait > maxBatchWait {
		errs = append(errs, fmt.Errorf("neo4j::batch::max_wait: %v; use 0 (write what is there) up to %v, default 100ms", n.Batch.MaxWait, maxBatchWait))
	}
	return errs
}

func hasTLSMaterial(t configtls.ClientConfig) bool {
	return t.CAFile != "" || t.CAPem != "" || t.CertFile != "" || t.CertPem != "" || t.KeyFile != "" || t.KeyPem != ""
}
