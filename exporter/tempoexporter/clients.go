package tempoexporter

import (
	"container/list"
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/collector/exporter"
	"go.uber.org/zap"
)

// tenantClients holds one OTLP exporter per tenant, created on first use. Past
// max clients the least recently used one is evicted: it shuts down once its
// in-flight sends are done.
type tenantClients struct {
	max     int
	create  func(tenantID string) (exporter.Traces, error)
	onOpen  func(delta int64) // open clients changed
	onEvict func()
	logger  *zap.Logger

	mu       sync.Mutex
	byTenant map[string]*list.Element // of *tenantClient
	lru      list.List                // most recently used first
	closing  sync.WaitGroup
}

type tenantClient struct {
	tenantID string
	exp      exporter.Traces
	inFlight sync.WaitGroup
}

func newTenantClients(maxClients int, create func(string) (exporter.Traces, error), logger *zap.Logger) *tenantClients {
	return &tenantClients{
		max:      maxClients,
		create:   create,
		onOpen:   func(int64) {},
		onEvict:  func() {},
		logger:   logger,
		byTenant: map[string]*list.Element{},
	}
}

// acquire returns the tenant's client for one send; call release after it.
func (c *tenantClients) acquire(tenantID string) (*tenantClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byTenant[tenantID]; ok {
		c.lru.MoveToFront(el)
		tc := el.Value.(*tenantClient)
		tc.inFlight.Add(1)
		return tc, nil
	}
	exp, err := c.create(tenantID)
	if err != nil {
		return nil, err
	}
	tc := &tenantClient{tenantID: tenantID, exp: exp}
	tc.inFlight.Add(1)
	c.byTenant[tenantID] = c.lru.PushFront(tc)
	c.onOpen(1)
	if c.lru.Len() > c.max {
		c.remove(c.lru.Back())
		c.onEvict()
	}
	return tc, nil
}

func (tc *tenantClient) release() { tc.inFlight.Done() }

// remove takes a client out of the map and shuts it down when idle. Callers hold mu.
func (c *tenantClients) remove(el *list.Element) {
	tc := c.lru.Remove(el).(*tenantClient)
	delete(c.byTenant, tc.tenantID)
	c.onOpen(-1)
	c.closing.Go(func() {
		tc.inFlight.Wait()
		if err := tc.exp.Shutdown(context.Background()); err != nil {
			c.logger.Warn("Closing a tenant client failed", zap.String("tenant", tc.tenantID), zap.Error(err))
		}
	})
}

// shutdown closes every client and waits for them.
func (c *tenantClients) shutdown(ctx context.Context) error {
	c.mu.Lock()
	for c.lru.Len() > 0 {
		c.remove(c.lru.Front())
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		c.closing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.Join(errors.New("tenant clients still closing"), ctx.Err())
	}
}
