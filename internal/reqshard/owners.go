// Package reqshard is the one shape of request-keyed state in loom: a
// component splits what it keeps per request into shards, by a hash of the
// request's req_id (else its trace id), and each shard is owned by one
// goroutine, the only one that reads or writes it, fed through a channel of
// its own. What every shard shares (telemetry, tables keyed by something
// else) has its own lock; nothing else does.
package reqshard // import "github.com/loom-otel/loom/internal/reqshard"

import (
	"context"
	"sync"
)

// Owners runs a goroutine per shard that hands each message sent to its
// shard, in order, to handle.
type Owners[M any] struct {
	inboxes []chan M
	running sync.WaitGroup
}

// Start starts the owners of n shards, each with an inbox of depth messages:
// a sender waits only while its shard's owner is that far behind.
func Start[M any](n, depth int, handle func(shard int, m M)) *Owners[M] {
	o := &Owners[M]{inboxes: make([]chan M, n)}
	o.running.Add(n)
	for i := range o.inboxes {
		inbox := make(chan M, depth)
		o.inboxes[i] = inbox
		go func() {
			defer o.running.Done()
			for m := range inbox {
				handle(i, m)
			}
		}()
	}
	return o
}

// Shards is the number of shards.
func (o *Owners[M]) Shards() int { return len(o.inboxes) }

// Send hands m to the owner of shard, waiting while its inbox is full.
func (o *Owners[M]) Send(shard int, m M) { o.inboxes[shard] <- m }

// SendContext is Send that gives up, with ctx's error, when ctx ends first.
func (o *Owners[M]) SendContext(ctx context.Context, shard int, m M) error {
	select {
	case o.inboxes[shard] <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop waits for the owners to handle what was sent, and ends them. Nothing
// may be sent after.
func (o *Owners[M]) Stop() {
	for _, inbox := range o.inboxes {
		close(inbox)
	}
	o.running.Wait()
}
