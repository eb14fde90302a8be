package tempoexporter

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.uber.org/zap"
)

// fakeClient records whether it was shut down.
type fakeClient struct {
	component.StartFunc
	consumer.ConsumeTracesFunc
	mu       sync.Mutex
	shutDown bool
}

func (f *fakeClient) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f *fakeClient) Shutdown(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shutDown = true
	return nil
}

func (f *fakeClient) isShutDown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shutDown
}

func TestTenantClientsEvictLeastRecentlyUsed(t *testing.T) {
	created := map[string]*fakeClient{}
	var open, evicted int64
	c := newTenantClients(2, func(id string) (exporter.Traces, error) {
		created[id] = &fakeClient{}
		return created[id], nil
	}, zap.NewNop())
	c.onOpen = func(d int64) { open += d }
	c.onEvict = func() { evicted++ }

	use := func(id string) *tenantClient {
		tc, err := c.acquire(id)
		require.NoError(t, err)
		return tc
	}
	use("a").release()
	busyB := use("b") // b stays in flight
	use("a").release()
	use("c").release() // over the bound: b is least recently used
	assert.Equal(t, int64(2), open)
	assert.Equal(t, int64(1), evicted)
	assert.False(t, created["b"].isShutDown(), "an evicted client closes only when its sends are done")
	busyB.release()
	assert.Eventually(t, created["b"].isShutDown, time.Second, time.Millisecond)

	again := use("b")
	again.release()
	assert.NotSame(t, busyB, again, "an evicted tenant gets a new client")

	require.NoError(t, c.shutdown(context.Background()))
	assert.Equal(t, int64(0), open)
	for id, f := range created {
		assert.True(t, f.isShutDown(), id)
	}
}

func TestTenantClientsCreateError(t *testing.T) {
	c := newTenantClients(1, func(string) (exporter.Traces, error) { return nil, errors.New("bad tls") }, zap.NewNop())
	_, err := c.acquire("a")
	require.Error(t, err)
	require.NoError(t, c.shutdown(context.Background()))
}
