package goldenfieldprocessor

import (
	"strings"
	"sync"
	"sync/atomic"
)

// fieldSet is a set of required fields by their position in the validator's
// list; positions beyond 63 are always in it.
type fieldSet uint64

const allFields = ^fieldSet(0)

func (f *fieldSet) add(i int) {
	if i < 64 {
		*f |= 1 << i
	}
}

func (f fieldSet) has(i int) bool { return i >= 64 || f&(1<<i) != 0 }

// maxCarriedServices bounds the services whose fields are learned; a record
// of any service beyond is judged against every required field.
const maxCarriedServices = 4096

// carriedFields learns, per service, which required fields its records have
// carried: a field is missing from a record only when its service's records
// have carried it. A service that writes no req_id, model or input hash (a
// web shop, a payment service) is not invalid for lacking what only an
// inference service has; a model upgrade that stops writing a field its
// service wrote is still caught. Every record reads it: the sets are atomic,
// and a service is looked up under a read lock.
type carriedFields struct {
	mu        sync.RWMutex
	byService map[string]*atomic.Uint64
}

func newCarriedFields() *carriedFields {
	return &carriedFields{byService: map[string]*atomic.Uint64{}}
}

// note adds the fields a record of service carries, and returns every field
// the service's records have carried.
func (c *carriedFields) note(service string, present fieldSet) fieldSet {
	c.mu.RLock()
	set, ok := c.byService[service]
	c.mu.RUnlock()
	if !ok {
		if set = c.add(service); set == nil {
			return allFields
		}
	}
	if known := fieldSet(set.Load()); known&present == present {
		return known
	}
	return fieldSet(set.Or(uint64(present)) | uint64(present))
}

func (c *carriedFields) add(service string) *atomic.Uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if set, ok := c.byService[service]; ok {
		return set
	}
	if len(c.byService) >= maxCarriedServices {
		return nil
	}
	set := new(atomic.Uint64)
	// A clone: the name may be a slice of a record the map must not pin.
	c.byService[strings.Clone(service)] = set
	return set
}
