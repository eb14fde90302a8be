package lokiexporter

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/loom-otel/loom/internal/golden"
	"github.com/loom-otel/loom/internal/tenant"
)

// pushPath is Loki's push API path, added to an endpoint that has no path.
const pushPath = "/loki/api/v1/push"

// Config is the loki exporter's configuration. As in the core otlphttp
// exporter, `timeout` is the HTTP client's: it bounds each push request.
type Config struct {
	ClientConfig confighttp.ClientConfig                                  `mapstructure:",squash"`
	QueueConfig  configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	RetryConfig  configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`

	// Encoding of the push body: protobuf (snappy-compressed, the default) or json.
	Encoding           Encoding                 `mapstructure:"encoding"`
	Labels             LabelsConfig             `mapstructure:"labels"`
	StructuredMetadata StructuredMetadataConfig `mapstructure:"structured_metadata"`
	Line               LineConfig               `mapstructure:"line"`
	Tenant             tenant.Config            `mapstructure:"tenant"`
	// MaxConcurrentPushes bounds the pushes of one batch in flight at once: a
	// batch makes one push per tenant, and may hold many tenants.
	MaxConcurrentPushes int `mapstructure:"max_concurrent_pushes"`

	_ struct{}
}

// LabelsConfig chooses the stream labels beyond service_name and level.
type LabelsConfig struct {
	// Attributes become stream labels, read from the record's attributes, else its resource's.
	Attributes []LabelAttribute `mapstructure:"attributes"`
	// MaxValuesPerLabel caps the distinct values of each configured label within
	// CardinalityWindow; further values go to structured metadata, counted.
	MaxValuesPerLabel int           `mapstructure:"max_values_per_label"`
	CardinalityWindow time.Duration `mapstructure:"cardinality_window"`

	_ struct{}
}

// LabelAttribute makes one attribute a stream label.
type LabelAttribute struct {
	Attribute string `mapstructure:"attribute"`
	// Name is the label name; default: the attribute name sanitized to Loki's rules.
	Name string `mapstructure:"name"`
	// TopSegment keeps only the part before the first '/' (model/forward -> model).
	TopSegment bool `mapstructure:"top_segment"`

	_ struct{}
}

func (la *LabelAttribute) labelName() string {
	if la.Name != "" {
		return la.Name
	}
	return sanitizeLabelName(la.Attribute)
}

// StructuredMetadataConfig adds attributes to the structured metadata that
// always carries the golden fields, event.id, trace_id and span_id.
type StructuredMetadataConfig struct {
	Attributes []string `mapstructure:"attributes"`

	_ struct{}
}

// LineConfig shapes the log line.
type LineConfig struct {
	// Format is json (default), logfmt or raw.
	Format LineFormat `mapstructure:"format"`
	// Attributes a json or logfmt line carries beside the body. Empty: every
	// record attribute that is not sent as a label, structured metadata or tenant.
	Attributes []string `mapstructure:"attributes"`
	// MaxSize is the longest line in bytes (Loki's max_line_size, 256 KiB by default).
	MaxSize int `mapstructure:"max_size"`
	// OnTooLong is truncate (default: cut and end with a marker) or drop; both are counted.
	OnTooLong OnTooLong `mapstructure:"on_too_long"`

	_ struct{}
}

// OnTooLong is what happens to a line longer than line::max_size.
type OnTooLong string

const (
	OnTooLongTruncate OnTooLong = "truncate"
	OnTooLongDrop     OnTooLong = "drop"
)

var (
	_ component.Config  = (*Config)(nil)
	_ confmap.Validator = (*Config)(nil)
)

// Validate checks the configuration; each error names the key and the fix.
func (c *Config) Validate() error {
	var errs []error
	if _, err := c.pushURL(); err != nil {
		errs = append(errs, err)
	}
	switch c.Encoding {
	case EncodingProtobuf:
		if c.ClientConfig.Compression.IsCompressed() {
			errs = append(errs, errors.New(`compression: protobuf pushes are already snappy-compressed; remove "compression" or set "encoding: json"`))
		}
	case EncodingJSON:
	default:
		errs = append(errs, fmt.Errorf(`encoding: %q is not supported; use "protobuf" or "json"`, c.Encoding))
	}
	errs = append(errs, c.Labels.validate(c.StructuredMetadata.Attributes)...)
	for _, name := range c.StructuredMetadata.Attributes {
		if name == "" || golden.IsPerRecord(name) {
			errs = append(errs, fmt.Errorf("structured_metadata::attributes: %q is empty or a golden field, which is always sent; remove it", name))
		}
	}
	errs = append(errs, c.Line.validate()...)
	if c.MaxConcurrentPushes <= 0 {
		errs = append(errs, errors.New("max_concurrent_pushes: must be positive, e.g. 4"))
	}
	if err := c.Tenant.Check("tenant"); err != nil {
		errs = append(errs, err)
	}
	if err := c.Tenant.CheckBatching("tenant", c.QueueConfig); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// pushURL is the endpoint, with Loki's push path when it has none.
func (c *Config) pushURL() (string, error) {
	u, err := url.Parse(c.ClientConfig.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf(`endpoint: %q is not an http(s) URL; set it to Loki's address, e.g. "http://loki:3100"`, c.ClientConfig.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = pushPath
	}
	return u.String(), nil
}

func (l *LabelsConfig) validate(metadata []string) []error {
	var errs []error
	// level is one of Loki's max_label_names_per_series; service_name is not counted.
	if limit := maxLabelNames - 1; len(l.Attributes) > limit {
		errs = append(errs, fmt.Errorf("labels::attributes: %d labels with level exceed Loki's limit of %d per stream; keep at most %d and send the others as structured_metadata::attributes", len(l.Attributes)+1, maxLabelNames, limit))
	}
	names := []string{labelServiceName, labelLevel}
	for i, la := range l.Attributes {
		key := fmt.Sprintf("labels::attributes::%d", i)
		name := la.labelName()
		switch {
		case la.Attribute == "":
			errs = append(errs, fmt.Errorf("%s::attribute: must name an attribute", key))
		case unbounded(la.Attribute):
			errs = append(errs, fmt.Errorf("%s::attribute: %q has a value per request or record and would explode stream cardinality; it is always sent as structured metadata, remove it here", key, la.Attribute))
		case !validLabelName(name):
			errs = append(errs, fmt.Errorf("%s::name: %q is not a Loki label name; use [a-zA-Z_][a-zA-Z0-9_]* not starting with __", key, name))
		case slices.Contains(names, name):
			errs = append(errs, fmt.Errorf("%s::name: label %q is already used; set a distinct name", key, name))
		case shadowsMetadata(la, name, metadata):
			errs = append(errs, fmt.Errorf("%s::name: label %q would shadow the structured metadata entry of that name, which carries another value; set a distinct name, e.g. %q", key, name, name+"_top"))
		}
		names = append(names, name)
	}
	if l.MaxValuesPerLabel <= 0 {
		errs = append(errs, errors.New("labels::max_values_per_label: must be positive, e.g. 100"))
	}
	if l.CardinalityWindow <= 0 {
		errs = append(errs, errors.New("labels::cardinality_window: must be positive, e.g. 1h"))
	}
	return errs
}

// unbounded reports whether an attribute takes a new value per request or record.
func unbounded(name string) bool {
	switch name {
	case golden.ReqID, golden.InputHash, golden.EventID, golden.TraceID, golden.SpanID,
		golden.MissingAttr, golden.InvalidAttr:
		return true
	}
	return golden.IsResourceUsage(name)
}

// shadowsMetadata reports whether the label would carry something else under
// the name of a structured metadata entry: a top segment, or another attribute.
func shadowsMetadata(la LabelAttribute, name string, metadata []string) bool {
	for _, field := range append([]string{golden.Stage, golden.ModelVer, golden.ValidAttr}, metadata...) {
		if sanitizeLabelName(field) == name && (la.TopSegment || la.Attribute != field) {
			return true
		}
	}
	return false
}

func (l *LineConfig) validate() []error {
	var errs []error
	switch l.Format {
	case LineFormatJSON, LineFormatLogfmt:
		if slices.Contains(l.Attributes, bodyKey) {
			errs = append(errs, fmt.Errorf("line::attributes: %q is the key of the record body; remove it", bodyKey))
		}
	case LineFormatRaw:
		if len(l.Attributes) > 0 {
			errs = append(errs, errors.New(`line::attributes: a raw line is the body alone; remove attributes or use "format: json"`))
		}
	default:
		errs = append(errs, fmt.Errorf(`line::format: %q is not supported; use "json", "logfmt" or "raw"`, l.Format))
	}
	if l.MaxSize < 1024 {
		errs = append(errs, fmt.Errorf("line::max_size: %d is below 1024 bytes; use Loki's max_line_size, 262144 by default", l.MaxSize))
	}
	if l.OnTooLong != OnTooLongTruncate && l.OnTooLong != OnTooLongDrop {
		errs = append(errs, fmt.Errorf(`line::on_too_long: %q is not supported; use "truncate" or "drop"`, l.OnTooLong))
	}
	return errs
}
