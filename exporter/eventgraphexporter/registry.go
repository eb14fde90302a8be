package eventgraphexporter

import (
	"sync"

	"go.opentelemetry.io/collector/component"

	"github.com/loom-otel/loom/internal/eventgraph"
)

// stores are the running exporters' stores by component ID, for the rca
// extension to read: written when a store opens and closes only.
var stores = struct {
	sync.Mutex
	byID map[component.ID]eventgraph.Store
}{byID: map[component.ID]eventgraph.Store{}}

// LookupStore returns the store of the running eventgraph exporter with
// this component ID: the graph it writes, read through the same interface on
// every backend.
func LookupStore(id component.ID) (eventgraph.Store, bool) {
	stores.Lock()
	defer stores.Unlock()
	s, ok := stores.byID[id]
	return s, ok
}

func registerStore(id component.ID, s eventgraph.Store) {
	stores.Lock()
	defer stores.Unlock()
	stores.byID[id] = s
}

func unregisterStore(id component.ID, s eventgraph.Store) {
	stores.Lock()
	defer stores.Unlock()
	if stores.byID[id] == s {
		delete(stores.byID, id)
	}
}
