package sqlitestore

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzJSONEncoder: whatever the text and numbers, the attributes encode to
// JSON that decodes to them (invalid UTF-8 as encoding/json repairs it), and
// exactly the values encoding/json refuses are refused.
func FuzzJSONEncoder(f *testing.F) {
	f.Add("error.type", "timeout", 5.0, true, "region=eu")
	f.Add(`a"b\c`, "line\nbreak\x00nul \u2028", math.Inf(1), false, "bad \xff utf-8")
	f.Add("é", "☃ 😀", math.Copysign(0, -1), true, "")
	f.Add("", "", 1e21, false, `"`)
	f.Add("k", "\u202e", 1e-7, true, "\x1f")
	f.Fuzz(func(t *testing.T, key, text string, number float64, flag bool, item string) {
		attrs := map[string]any{key + ".text": text, key + ".number": number, key + ".flag": flag, key + ".list": []string{item, text}}
		var enc jsonEncoder
		got, err := enc.attrs(attrs)
		want, wantErr := json.Marshal(attrs)
		if wantErr != nil {
			assert.Error(t, err)
			return
		}
		require.NoError(t, err)
		decoded, err := decodeAttrs(got.(string))
		require.NoError(t, err, got)
		expected, err := decodeAttrs(string(want))
		require.NoError(t, err)
		assert.Equal(t, expected, decoded)

		list := enc.list([]string{item, key})
		var items []string
		require.NoError(t, json.Unmarshal([]byte(list), &items))
		wantList, _ := json.Marshal([]string{item, key})
		var wantItems []string
		require.NoError(t, json.Unmarshal(wantList, &wantItems))
		assert.Equal(t, wantItems, items)
	})
}

func TestJSONEncoderWritesNothingForNothing(t *testing.T) {
	var enc jsonEncoder
	attrs, err := enc.attrs(nil)
	require.NoError(t, err)
	assert.Nil(t, attrs, "NULL: a merge keeps what is stored")
}

func TestJSONEncoderWritesOtherTypesAsEncodingJSON(t *testing.T) {
	var enc jsonEncoder
	got, err := enc.attrs(map[string]any{"b.count": 3, "a.list": []any{"x", 1.5}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"a.list":["x",1.5],"b.count":3}`, got.(string))
	_, err = enc.attrs(map[string]any{"c.channel": make(chan int)})
	assert.Error(t, err)
}
