// Package tenant resolves the X-Scope-OrgID tenant of a record for the exporters
// that write to Grafana backends (Loki, Tempo), which share one tenant-id syntax.
package tenant

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Header is the HTTP header (and gRPC metadata key) that carries the tenant.
const Header = "X-Scope-OrgID"

// maxLen is the longest tenant id Loki and Tempo accept, in bytes.
const maxLen = 150

// Config says where a record's tenant comes from.
//
// The tenant is a resource attribute, set by a tier the backend trusts (the
// node agent, which overwrites what its clients send), never a record
// attribute: one service's log line cannot write into another tenant.
type Config struct {
	// FromAttribute names the resource attribute holding the tenant id. A
	// record attribute of that name is ignored. Empty: every record goes to
	// Default.
	FromAttribute string `mapstructure:"from_attribute"`
	// Default is the tenant of records without the attribute. Empty: no header
	// is sent, which suits backends running without multi-tenancy.
	Default string `mapstructure:"default"`

	_ struct{}
}

// Check validates Default against the tenant-id rules. key is where the
// Config sits in the component's configuration (e.g. "tenant"): the error
// names the full key, as the collector spells it. Config has no Validate
// method because confmap would name only the block.
func (c *Config) Check(key string) error {
	if c.Default != "" && !Valid(c.Default) {
		return fmt.Errorf(`%s::default: %q is not a valid tenant id; use 1 to %d bytes of letters, digits and !-_.*'() (not "." or "..")`, key, c.Default, maxLen)
	}
	return nil
}

// ErrInvalid reports a tenant attribute whose value is not a valid tenant id.
var ErrInvalid = errors.New("invalid tenant id")

// Of returns the tenant of the records of a resource with the given
// attributes. A present but invalid value is an error, never a silent
// fallback to Default: that would write one tenant's data into another's.
func (c *Config) Of(resource pcommon.Map) (string, error) {
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
