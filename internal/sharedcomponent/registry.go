// Package sharedcomponent shares one value between the components of one
// component ID: a collector creates a processor, exporter or receiver once
// per pipeline signal (logs, metrics, traces), and Loom's components keep
// one state for all of them (one index, one sampler, one store, one set of
// BPF programs).
package sharedcomponent // import "github.com/loom-otel/loom/internal/sharedcomponent"

import (
	"sync"

	"go.opentelemetry.io/collector/component"
)

// Registry holds one value per component ID from its first Acquire to its
// last Release. A component acquires when it is created and releases when
// it shuts down, so a reloaded configuration gets new values.
type Registry[T any] struct {
	mu      sync.Mutex
	entries map[component.ID]*entry[T]
}

type entry[T any] struct {
	value T
	refs  int
}

// Acquire returns the value of id, made by create on first use.
func (r *Registry[T]) Acquire(id component.ID, create func() (T, error)) (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		value, err := create()
		if err != nil {
			return value, err
		}
		if r.entries == nil {
			r.entries = map[component.ID]*entry[T]{}
		}
		e = &entry[T]{value: value}
		r.entries[id] = e
	}
	e.refs++
	return e.value, nil
}

// Release undoes one Acquire of id and reports whether it was the last:
// then the value is forgotten, and the caller stops it.
func (r *Registry[T]) Release(id component.ID) (last bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[id]
	if !ok {
		return false
	}
	if e.refs--; e.refs > 0 {
		return false
	}
	delete(r.entries, id)
	return true
}
