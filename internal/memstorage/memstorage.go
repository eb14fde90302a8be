// Package memstorage is an in-memory storage extension for tests of persistent
// sending queues: what one exporter instance leaves in it, the next one finds,
// as with file_storage across a collector restart.
package memstorage

import (
	"context"
	"maps"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Extension keeps every client's keys in one map.
type Extension struct {
	component.StartFunc
	component.ShutdownFunc

	mu   sync.Mutex
	data map[string][]byte
}

var _ storage.Extension = (*Extension)(nil)

// New returns an empty store.
func New() *Extension {
	return &Extension{data: map[string][]byte{}}
}

// GetClient returns a client whose keys are private to kind, id and name.
func (e *Extension) GetClient(_ context.Context, kind component.Kind, id component.ID, name string) (storage.Client, error) {
	return &client{ext: e, prefix: kind.String() + "/" + id.String() + "/" + name + "/"}, nil
}

type client struct {
	ext    *Extension
	prefix string
}

func (c *client) Get(ctx context.Context, key string) ([]byte, error) {
	op := storage.GetOperation(key)
	err := c.Batch(ctx, op)
	return op.Value, err
}

func (c *client) Set(ctx context.Context, key string, value []byte) error {
	return c.Batch(ctx, storage.SetOperation(key, value))
}

func (c *client) Delete(ctx context.Context, key string) error {
	return c.Batch(ctx, storage.DeleteOperation(key))
}

func (c *client) Batch(_ context.Context, ops ...*storage.Operation) error {
	c.ext.mu.Lock()
	defer c.ext.mu.Unlock()
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = c.ext.data[c.prefix+op.Key]
		case storage.Set:
			c.ext.data[c.prefix+op.Key] = append([]byte(nil), op.Value...)
		case storage.Delete:
			delete(c.ext.data, c.prefix+op.Key)
		}
	}
	return nil
}

func (*client) Close(context.Context) error { return nil }

// Host offers extensions to the components started with it.
type Host map[component.ID]component.Component

// GetExtensions returns a copy of the host's extensions.
func (h Host) GetExtensions() map[component.ID]component.Component {
	return maps.Clone(h)
}
