package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGoldenInvalid(t *testing.T) {
	p := GoldenInvalid{}
	assert.True(t, p.MatchRecord(&Record{Invalid: true}))
	assert.False(t, p.MatchRecord(&Record{}))
	assert.True(t, p.MatchRequest(&Request{}, true))
	assert.False(t, p.MatchRequest(&Request{}, false))
}
