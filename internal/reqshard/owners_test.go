package reqshard

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each shard's messages are handled in the order they were sent, by one
// goroutine at a time (run with -race: the shards' state has no lock), and
// Stop returns once every message sent was handled.
func TestEachShardHandlesItsMessagesInOrder(t *testing.T) {
	const shards, senders, perSender = 4, 3, 500
	seen := make([][]int, shards)
	o := Start(shards, 2, func(shard, m int) { seen[shard] = append(seen[shard], m) })
	require.Equal(t, shards, o.Shards())
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSender {
				m := s*perSender + i
				o.Send(m%shards, m)
			}
		}()
	}
	wg.Wait()
	o.Stop()
	total := 0
	for shard, ms := range seen {
		last := make([]int, senders)
		for i := range last {
			last[i] = -1
		}
		for _, m := range ms {
			assert.Equal(t, shard, m%shards, "a message reaches its own shard")
			s := m / perSender
			assert.Greater(t, m, last[s], "one sender's messages keep their order")
			last[s] = m
		}
		total += len(ms)
	}
	assert.Equal(t, senders*perSender, total)
}

// A sender whose shard's owner is behind waits, and gives up when its
// context ends.
func TestSendContextGivesUpWhenTheOwnerIsBehind(t *testing.T) {
	release := make(chan struct{})
	handled := make(chan int, 2)
	o := Start(1, 1, func(_, m int) {
		<-release
		handled <- m
	})
	// The owner takes 1 and waits; 2 fills the inbox once it has.
	o.Send(0, 1)
	require.NoError(t, o.SendContext(context.Background(), 0, 2))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, o.SendContext(ctx, 0, 3), context.Canceled)
	close(release)
	o.Stop()
	close(handled)
	var got []int
	for m := range handled {
		got = append(got, m)
	}
	assert.Equal(t, []int{1, 2}, got, "what was given up on is never handled")
}
