package lokiexporter

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCardinalityGuard(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	g := newCardinalityGuard(2, 2, time.Hour)

	assert.True(t, g.admit(0, "a", start))
	assert.True(t, g.admit(0, "b", start))
	assert.False(t, g.admit(0, "c", start), "a third distinct value overflows")
	assert.True(t, g.admit(0, "a", start.Add(time.Minute)), "a value seen in the window is still admitted")
	assert.True(t, g.admit(1, "c", start), "each label has its own budget")

	next := start.Add(time.Hour)
	assert.True(t, g.admit(0, "c", next), "a new window starts empty")
	assert.True(t, g.admit(0, "d", next))
	assert.False(t, g.admit(0, "a", next))
}

func TestCardinalityGuardConcurrent(t *testing.T) {
	g := newCardinalityGuard(1, 10, time.Hour)
	now := time.Now()
	var admitted sync.Map
	var wg sync.WaitGroup
	for w := range 8 { // as many as the queue's consumers
		wg.Go(func() {
			for i := range 100 {
				v := fmt.Sprintf("v%d", (i*7+w)%50)
				if g.admit(0, v, now) {
					admitted.Store(v, true)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	admitted.Range(func(any, any) bool { n++; return true })
	assert.Equal(t, 10, n, "exactly max distinct values, however the calls interleave")
}

func BenchmarkCardinalityGuard(b *testing.B) {
	g := newCardinalityGuard(1, 100, time.Hour)
	values := make([]string, 200)
	for i := range values {
		values[i] = fmt.Sprintf("model-%d", i)
	}
	now := time.Now()
	i := 0
	for b.Loop() {
		g.admit(0, values[i%len(values)], now)
		i++
	}
}
