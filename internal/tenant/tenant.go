// Package tenant resolves the X-Scope-OrgID tenant of a record for the exporters
// that write to Grafana backends (Loki, Tempo), which share one tenant-id syntax.
//
// A record's tenant comes, in this order, from a request header its client
// sent (client metadata, kept by a receiver with include_metadata: true and
// carried with the records through the pipeline and the persistent queue), from
// its resource attribute, or from the default. A header is only as trustworthy
// as the client that sets it: read one behind an authenticator, or a proxy that
// sets it (overwriting what clients sent), never from clients that may pick any
// tenant they like. A request without the header falls back to the resource
// attribute, which its client may set too, unless a trusted tier sets it.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"golang.org/x/net/http/httpguts"
)

// Header is the HTTP header (and gRPC metadata key) that carries the tenant.
const Header = "X-Scope-OrgID"

// maxLen is the longest tenant id Loki and Tempo accept, in bytes.
const maxLen = 150

// Config says where a record's tenant comes from.
//
// The tenant is a client's request header, set by an authenticating proxy, or
// a resource attribute, set by a tier the backend trusts (the node agent,
// which overwrites what its clients send); never a record attribute: one
// service's log line cannot write into another tenant.
type Config struct {
	// FromMetadata names the client metadata key (a request header, e.g.
	// x-scope-orgid) holding the tenant id; when the key is present it wins
	// over FromAttribute. The lookup is case-insensitive, as client.Metadata's
	// Get is (receivers lowercase the keys they keep): write it lowercase, as
	// gRPC sends it and sending_queue::batch::partition::metadata_keys lists
	// it. Empty: client metadata is not read.
	FromMetadata string `mapstructure:"from_metadata"`
	// FromAttribute names the resource attribute holding the tenant id. A
	// record attribute of that name is ignored. Empty: every record without
	// the metadata goes to Default.
	FromAttribute string `mapstructure:"from_attribute"`
	// Default is the tenant of records with neither. Empty: no header is
	// sent, which suits backends running without multi-tenancy.
	Default string `mapstructure:"default"`

	_ struct{}
}

// Check validates FromMetadata as a header name and Default against the
// tenant-id rules. key is where the Config sits in the component's
// configuration (e.g. "tenant"): each error names the full key, as the
// collector spells it. Config has no Validate method because confmap would
// name only the block.
func (c *Config) Check(key string) error {
	var errs []error
	if c.FromMetadata != "" && !httpguts.ValidHeaderFieldName(c.FromMetadata) {
		errs = append(errs, fmt.Errorf(`%s::from_metadata: %q is not a valid header name; use the request header that carries the tenant, e.g. "x-scope-orgid"`, key, c.FromMetadata))
	}
	if c.Default != "" && !Valid(c.Default) {
		errs = append(errs, fmt.Errorf(`%s::default: %q is not a valid tenant id; use 1 to %d bytes of letters, digits and !-_.*'() (not "." or "..")`, key, c.Default, maxLen))
	}
	return errors.Join(errs...)
}

// CheckBatching requires an exporter's batches to be partitioned by the
// FromMetadata key: exporterhelper's batcher gives a batch merged from
// several requests the metadata of its partition keys only, so without it a
// batch would lose its clients' tenant and go to FromAttribute or Default.
// key is where the Config sits, as for Check.
func (c *Config) CheckBatching(key string, queue configoptional.Optional[exporterhelper.QueueBatchConfig]) error {
	if c.FromMetadata == "" || !queue.HasValue() || !queue.Get().Batch.HasValue() {
		return nil
	}
	partitionKeys := queue.Get().Batch.Get().Partition.MetadataKeys
	if slices.ContainsFunc(partitionKeys, func(k string) bool { return strings.EqualFold(k, c.FromMetadata) }) {
		return nil
	}
	return fmt.Errorf(`%s::from_metadata: %q must be in sending_queue::batch::partition::metadata_keys, or batches merge the records of several clients and lose their tenant; add it there`, key, c.FromMetadata)
}

// ErrInvalid reports a tenant header or attribute whose value is not a valid tenant id.
var ErrInvalid = errors.New("invalid tenant id")

// Of returns the tenant of the records of a resource with the given
// attributes, sent in a request whose client metadata ctx carries. A present
// but invalid value (for the metadata also an empty one, or several) is an
// error, never a silent fallback to the attribute or Default: that would
// write one tenant's data into another's.
func (c *Config) Of(ctx context.Context, resource pcommon.Map) (string, error) {
	if c.FromMetadata != "" {
		if values := client.FromContext(ctx).Metadata.Get(c.FromMetadata); len(values) > 0 {
			return c.ofMetadata(values)
		}
	}
	if c.FromAttribute == "" {
		return c.Default, nil
	}
	v, ok := resource.Get(c.FromAttribute)
	if !ok {
		return c.Default, nil
	}
	id := v.AsString()
	if id == "" {
		return c.Default, nil
	}
	if !Valid(id) {
		return "", ErrInvalid
	}
	return id, nil
}

func (c *Config) ofMetadata(values []string) (string, error) {
	if len(values) > 1 {
		return "", fmt.Errorf("client metadata %s has %d values, want one: %w", c.FromMetadata, len(values), ErrInvalid)
	}
	if !Valid(values[0]) {
		return "", fmt.Errorf("client metadata %s: %w", c.FromMetadata, ErrInvalid)
	}
	return values[0], nil
}

// Valid reports whether id follows the tenant-id rules of Loki, Tempo and Mimir:
// 1 to 150 bytes of ASCII letters, digits and !-_.*'(), and not "." or "..".
func Valid(id string) bool {
	if id == "" || len(id) > maxLen || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '!' || c == '-' || c == '_' || c == '.' || c == '*' || c == '\'' || c == '(' || c == ')':
		default:
			return false
		}
	}
	return true
}
