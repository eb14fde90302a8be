package lokiexporter

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"time"
)

// connTracker remembers the connections pushes used, so that Shutdown can close
// the idle ones: confighttp wraps its *http.Transport in round trippers
// (otelhttp, headers, compression) that do not forward CloseIdleConnections,
// which leaves http.Client.CloseIdleConnections a no-op.
type connTracker struct {
	mu       sync.Mutex
	lastUsed map[net.Conn]time.Time
}

// connRetention is how long after its last use a connection is remembered.
// The transport closes idle connections after idle_conn_timeout (90s by
// default), so older entries are almost always closed already; forgetting them
// keeps the set as small as the connections of the last hour.
const connRetention = time.Hour

func newConnTracker() *connTracker {
	return &connTracker{lastUsed: map[net.Conn]time.Time{}}
}

// trace returns ctx with a client trace that records the connection a request gets.
func (t *connTracker) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { t.used(info.Conn, time.Now()) },
	})
}

func (t *connTracker) used(conn net.Conn, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, last := range t.lastUsed {
		if now.Sub(last) > connRetention {
			delete(t.lastUsed, c)
		}
	}
	t.lastUsed[conn] = now
}

// closeAll closes every remembered connection; call it once no request is in flight.
func (t *connTracker) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.lastUsed {
		_ = c.Close()
		delete(t.lastUsed, c)
	}
}
