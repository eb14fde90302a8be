package sqlitestore

import (
	"hash/fnv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzSpanKey: the hash over a key's parts is hash/fnv's of the joined key,
// which files already written hold.
func FuzzSpanKey(f *testing.F) {
	f.Add("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
	f.Add("t1", "")
	f.Add("a/b", "c\x00é")
	f.Fuzz(func(t *testing.T, traceID, spanID string) {
		if traceID == "" {
			assert.Nil(t, spanKey(traceID, spanID))
			return
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(traceID + "/" + spanID))
		assert.Equal(t, int64(h.Sum64()), spanKey(traceID, spanID))
	})
}
