package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInputHash(t *testing.T) {
	p, err := NewInputHash([]string{"00-09", "f7", " a0 - a1 "})
	require.NoError(t, err)
	for hash, want := range map[string]bool{
		"00000000": true, "09ffffff": true, "0a000000": false, "f7a1b2c3": true, "f8000000": false,
		"a1000000": true, "a2000000": false, "": false, "0": false, "F7A1B2C3": false,
	} {
		assert.Equal(t, want, p.MatchRequest(&Request{InputHash: hash}, false), hash)
	}
	assert.False(t, p.MatchRecord(&Record{}))
}

func TestParseHashRange(t *testing.T) {
	r, err := ParseHashRange("00-09")
	require.NoError(t, err)
	assert.Equal(t, "00-09", r.String())
	r, err = ParseHashRange("f7")
	require.NoError(t, err)
	assert.Equal(t, "f7", r.String())
	for _, bad := range []string{"", "-", "0-", "-9", "0-09", "09-00", "g0", "F7", "123456789", "00-09-0a"} {
		_, err := ParseHashRange(bad)
		assert.Error(t, err, bad)
	}
	_, err = NewInputHash(nil)
	assert.Error(t, err)
	_, err = NewInputHash([]string{"f7", "zz"})
	assert.ErrorContains(t, err, "::1:")
}

func FuzzParseHashRange(f *testing.F) {
	for _, seed := range []string{"00-09", "f7", "a-f", "09-00", "-", "ffffffff-ffffffff", "0\x00-1"} {
		f.Add(seed, "f7a1b2c3")
	}
	f.Fuzz(func(t *testing.T, text, hash string) {
		r, err := ParseHashRange(text)
		if err != nil {
			return
		}
		// A parsed range prints back to a form that parses to itself.
		again, err := ParseHashRange(r.String())
		if err != nil || again != r {
			t.Fatalf("%q parsed to %q, which parses to %q, %v", text, r.String(), again.String(), err)
		}
		if r.Contains(hash) && len(hash) < len(r.lo) {
			t.Fatalf("%q contains the too-short %q", r.String(), hash)
		}
	})
}
