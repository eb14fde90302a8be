package lokiexporter

import (
	"strings"
	"sync"
	"time"
)

// cardinalityGuard bounds the distinct values each stream label may take within
// a fixed window. A value already admitted in the window is always admitted
// again; once a label holds maxValues distinct values, new ones are refused
// until the window ends and every label starts empty.
type cardinalityGuard struct {
	maxValues int
	window    time.Duration

	mu        sync.Mutex
	windowEnd time.Time
	seen      []map[string]struct{} // per label
}

func newCardinalityGuard(labels, maxValues int, window time.Duration) *cardinalityGuard {
	g := &cardinalityGuard{maxValues: maxValues, window: window, seen: make([]map[string]struct{}, labels)}
	for i := range g.seen {
		g.seen[i] = make(map[string]struct{}, maxValues)
	}
	return g
}

// admit reports whether label i may take value at time now.
func (g *cardinalityGuard) admit(i int, value string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !now.Before(g.windowEnd) {
		for _, seen := range g.seen {
			clear(seen)
		}
		g.windowEnd = now.Add(g.window)
	}
	seen := g.seen[i]
	if _, ok := seen[value]; ok {
		return true
	}
	if len(seen) >= g.maxValues {
		return false
	}
	// Clone: the value may share memory with a large decoded batch.
	seen[strings.Clone(value)] = struct{}{}
	return true
}
