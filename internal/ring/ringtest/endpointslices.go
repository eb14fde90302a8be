// Package ringtest is a stand-in of the part of the Kubernetes API that the
// k8s resolvers read, for tests: contrib's load_balancing exporter in the
// agents, and the gateways' hand-over (internal/ring.EndpointSlices).
package ringtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// EndpointSliceAPI is the part of a Kubernetes API server that the k8s
// resolvers read: the EndpointSlices of one Service, listed and watched. A
// test changes the Service's ready addresses as a StatefulSet scaled up or
// down changes them, and the resolvers follow at run time (the agents'
// ring as it follows the chart's headless Service through the dns resolver
// too: both hand the resolver's list to the same ring).
type EndpointSliceAPI struct {
	server      *httptest.Server
	service, ns string
	port        int
	mu          sync.Mutex
	version     int
	addresses   []string
	changed     chan struct{} // closed and replaced on every change
	closing     chan struct{}
}

// StartEndpointSliceAPI serves the EndpointSlices of service in namespace,
// with port as their port and no ready address yet, until the test ends.
func StartEndpointSliceAPI(t testing.TB, service, namespace string, port int) *EndpointSliceAPI {
	t.Helper()
	api := &EndpointSliceAPI{service: service, ns: namespace, port: port, version: 1, changed: make(chan struct{}), closing: make(chan struct{})}
	api.server = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(func() {
		close(api.closing) // ends the open watches, which Close waits for
		api.server.Close()
	})
	return api
}

// Kubeconfig writes a kubeconfig naming this server, for $KUBECONFIG of the
// processes whose resolver reads it.
func (api *EndpointSliceAPI) Kubeconfig(t testing.TB) string {
	t.Helper()
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []any{map[string]any{"name": "e2e", "cluster": map[string]any{"server": api.server.URL}}},
		"users":           []any{map[string]any{"name": "e2e", "user": map[string]any{}}},
		"contexts":        []any{map[string]any{"name": "e2e", "context": map[string]any{"cluster": "e2e", "user": "e2e", "namespace": api.ns}}},
		"current-context": "e2e",
	}
	raw, err := json.Marshal(cfg) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// SetReady makes addresses the Service's ready endpoints.
func (api *EndpointSliceAPI) SetReady(addresses ...string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.version++
	api.addresses = append([]string(nil), addresses...)
	close(api.changed)
	api.changed = make(chan struct{})
}

// slice is the Service's one EndpointSlice as it is now; api.mu must be held.
func (api *EndpointSliceAPI) slice() map[string]any {
	endpoints := make([]any, 0, len(api.addresses))
	for _, addr := range api.addresses {
		endpoints = append(endpoints, map[string]any{"addresses": []any{addr}, "conditions": map[string]any{"ready": true}})
	}
	return map[string]any{
		"kind":       "EndpointSlice",
		"apiVersion": "discovery.k8s.io/v1",
		"metadata": map[string]any{
			"name": api.service + "-e2e", "namespace": api.ns, "resourceVersion": strconv.Itoa(api.version),
			"labels": map[string]any{"kubernetes.io/service-name": api.service},
		},
		"addressType": "IPv4",
		"endpoints":   endpoints,
		"ports":       []any{map[string]any{"name": "otlp-grpc", "port": api.port, "protocol": "TCP"}},
	}
}

func (api *EndpointSliceAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != fmt.Sprintf("/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices", api.ns) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	query := r.URL.Query()
	if watch := query.Get("watch"); watch != "true" && watch != "1" {
		api.mu.Lock()
		list := map[string]any{
			"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
			"metadata": map[string]any{"resourceVersion": strconv.Itoa(api.version)},
			"items":    []any{api.slice()},
		}
		api.mu.Unlock()
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	api.watch(w, r)
}

// watch streams the slice's changes after the version the client has. A
// client that asks for the initial events (client-go's watch-list) gets the
// slice and the bookmark that ends them.
func (api *EndpointSliceAPI) watch(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	query := r.URL.Query()
	timeout := 5 * time.Minute
	if s, err := strconv.Atoi(query.Get("timeoutSeconds")); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	known, _ := strconv.Atoi(query.Get("resourceVersion"))
	enc := json.NewEncoder(w)
	send := func(eventType string, object map[string]any) bool {
		if err := enc.Encode(map[string]any{"type": eventType, "object": object}); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}

	api.mu.Lock()
	version, slice, changed := api.version, api.slice(), api.changed
	api.mu.Unlock()
	switch {
	case query.Get("sendInitialEvents") == "true":
		if !send("ADDED", slice) {
			return
		}
		bookmark := map[string]any{
			"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
			"metadata": map[string]any{
				"resourceVersion": strconv.Itoa(version),
				"annotations":     map[string]any{"k8s.io/initial-events-end": "true"},
			},
		}
		if !send("BOOKMARK", bookmark) {
			return
		}
	case known < version:
		if !send("MODIFIED", slice) {
			return
		}
	}
	end := time.After(timeout)
	for {
		select {
		case <-changed:
			api.mu.Lock()
			slice, changed = api.slice(), api.changed
			api.mu.Unlock()
			if !send("MODIFIED", slice) {
				return
			}
		case <-end:
			return
		case <-r.Context().Done():
			return
		case <-api.closing:
			return
		}
	}
}
