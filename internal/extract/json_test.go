package extract

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

var testLimits = JSONLimits{MaxDepth: 8, MaxFields: 64}

// flat renders fields as key=value strings for compact comparison.
func flat(fields []Field) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		switch f.Kind {
		case String:
			out[i] = fmt.Sprintf("%s=%q", f.Key, f.Str)
		case Raw:
			out[i] = fmt.Sprintf("%s=raw:%s", f.Key, f.Str)
		case Int:
			out[i] = fmt.Sprintf("%s=%d", f.Key, f.Int)
		case Double:
			out[i] = fmt.Sprintf("%s=%g", f.Key, f.Double)
		case Bool:
			out[i] = fmt.Sprintf("%s=%t", f.Key, f.Bool)
		}
	}
	return out
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		lim     JSONLimits
		want    string
		limited Limited
	}{
		{
			name: "gateway line",
			body: `{"level":"info","msg":"received request","req_id":"req-1715234890123-a1b2c3","latency_ms":12}`,
			want: `level="info" msg="received request" req_id="req-1715234890123-a1b2c3" latency_ms=12`,
		},
		{
			name: "nested keys are joined with dots, nulls skipped, arrays raw",
			body: ` {"usage":{"prompt_tokens":523,"detail":{"cached":true}},"x":null,"messages":[{"role":"user"},"hi"],"t":1.5e3} `,
			want: `usage.prompt_tokens=523 usage.detail.cached=true messages=raw:[{"role":"user"},"hi"] t=1500`,
		},
		{
			name: "escapes are decoded",
			body: `{"msg":"line1\nline2 \"q\" \u00e9 \ud83d\ude80 \ud800x","k\u0065y":"\/"}`,
			want: `msg="line1\nline2 \"q\" é 🚀 ` + "\uFFFD" + `x" key="/"`,
		},
		{
			name: "numbers: ints, doubles and out-of-range kept as text",
			body: `{"a":-0,"b":9223372036854775808,"c":1e400,"d":0.25}`,
			want: `a=0 b=9.223372036854776e+18 c="1e400" d=0.25`,
		},
		{
			name:    "depth limit keeps deeper objects raw",
			body:    `{"a":{"b":{"c":1}},"d":2}`,
			lim:     JSONLimits{MaxDepth: 2, MaxFields: 64},
			want:    `a.b=raw:{"c":1} d=2`,
			limited: LimitedDepth,
		},
		{
			name:    "field limit",
			body:    `{"a":1,"b":2,"c":3}`,
			lim:     JSONLimits{MaxDepth: 8, MaxFields: 2},
			want:    `a=1 b=2`,
			limited: LimitedFields,
		},
		{name: "empty object", body: `{}`, want: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := tt.lim
			if lim == (JSONLimits{}) {
				lim = testLimits
			}
			fields, limited, err := JSON(tt.body, lim, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(flat(fields), " "); got != tt.want {
				t.Errorf("fields\n got %s\nwant %s", got, tt.want)
			}
			if limited != tt.limited {
				t.Errorf("limited = %b, want %b", limited, tt.limited)
			}
			for _, f := range fields {
				if f.Kind == String && !strings.Contains(tt.body[f.Start:f.End], `\`) && tt.body[f.Start:f.End] != `"`+f.Str+`"` && f.Str != "1e400" {
					t.Errorf("%s: offsets [%d,%d) cover %q", f.Key, f.Start, f.End, tt.body[f.Start:f.End])
				}
			}
		})
	}
}

func TestJSONRejects(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `"s"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":01}`, `{"a":1.}`, `{"a":-}`,
		`{"a":tru}`, `{"a":"x` + "\n" + `"}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":[1,]}`, `{"a":[1 2]}`,
		`{"a":{"b":1}`, `{"a":[{"b":1]}`, `{"a":{"b":1,}}`, `{'a':1}`, `{"a":1}{"b":2}`,
	} {
		dst := []Field{{Key: "kept"}}
		got, _, err := JSON(body, testLimits, dst)
		if err == nil {
			t.Errorf("JSON(%q) accepted invalid JSON", body)
		}
		if len(got) != 1 {
			t.Errorf("JSON(%q) left %d fields in dst, want the caller's 1", body, len(got))
		}
	}
}

func TestJSONDeepNestingDoesNotRecurse(t *testing.T) {
	body := `{"a":` + strings.Repeat(`[{"b":`, 200000) + `1` + strings.Repeat(`}]`, 200000) + `}`
	fields, limited, err := JSON(body, JSONLimits{MaxDepth: 4, MaxFields: 8}, nil)
	if err != nil || len(fields) != 1 || fields[0].Kind != Raw || limited != 0 {
		t.Fatalf("got %d fields, limited %b, err %v", len(fields), limited, err)
	}
}

// reference flattens a JSON object with encoding/json, the way JSON should.
func reference(prefix string, v any, depth, maxDepth int, out map[string]string) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for k, v := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		switch v := v.(type) {
		case map[string]any:
			if depth < maxDepth {
				reference(key, v, depth+1, maxDepth, out)
			} else {
				out[key] = "raw"
			}
		case []any:
			out[key] = "raw"
		case nil:
		case string:
			out[key] = fmt.Sprintf("%q", v)
		case bool:
			out[key] = fmt.Sprint(v)
		case json.Number:
			if f, err := v.Float64(); err == nil && !math.IsInf(f, 0) {
				out[key] = fmt.Sprint(f + 0) // -0 and 0 are one integer
			} else {
				out[key] = fmt.Sprintf("%q", v.String())
			}
		}
	}
}

func FuzzJSON(f *testing.F) {
	for _, seed := range []string{
		`{"level":"info","msg":"received request","req_id":"req-1715234890123-a1b2c3","latency_ms":12}`,
		`{"a":{"b":{"c":[1,{"d":null}]}},"e":"\u00e9\ud83d\ude80","f":-1.5e-3,"g":true}`,
		`{"a":1,"a":2}`, `{"a":"\ud800"}`, `{"x":{}}`, `{"a":1e400}`, `[1]`, `{"a":`, "{\"a\":\"\xff\"}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		const maxDepth = 3
		fields, _, err := JSON(body, JSONLimits{MaxDepth: maxDepth, MaxFields: 1 << 20}, nil)
		var decoded any
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		refErr := dec.Decode(&decoded)
		_, isObject := decoded.(map[string]any)
		valid := json.Valid([]byte(body)) && isObject && refErr == nil
		if valid != (err == nil) {
			t.Fatalf("JSON(%q) error = %v, but encoding/json says valid object = %v", body, err, valid)
		}
		if err != nil || !utf8.ValidString(body) {
			return
		}
		for _, f := range fields {
			if f.Start < 0 || f.End > len(body) || f.Start > f.End {
				t.Fatalf("field %s has offsets [%d,%d) outside the body", f.Key, f.Start, f.End)
			}
		}
		// Compare values where keys are unique (duplicates and dotted keys collide differently).
		if hasDuplicateKeys(body) {
			return
		}
		got := map[string]string{}
		for _, f := range fields {
			if _, dup := got[f.Key]; dup {
				return
			}
			switch f.Kind {
			case Raw:
				got[f.Key] = "raw"
			case Int: // the reference decodes every number to float64
				got[f.Key] = fmt.Sprint(float64(f.Int))
			default:
				got[f.Key] = flat([]Field{f})[0][len(f.Key)+1:]
			}
		}
		want := map[string]string{}
		reference("", decoded, 1, maxDepth, want)
		if len(got) != len(want) {
			t.Fatalf("JSON(%q) = %v, reference %v", body, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("JSON(%q)[%s] = %s, reference %s", body, k, got[k], v)
			}
		}
	})
}

// hasDuplicateKeys reports whether an object in the JSON text repeats a key
// at any depth: the reference keeps the last, the extractor every field of
// each, so a repeated parent's fields are not comparable even when their
// flattened keys differ.
func hasDuplicateKeys(body string) bool {
	dec := json.NewDecoder(strings.NewReader(body))
	type level struct {
		keys      map[string]bool
		expectKey bool
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &level{keys: map[string]bool{}, expectKey: true})
			case '[':
				stack = append(stack, &level{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].keys != nil {
					stack[len(stack)-1].expectKey = true
				}
			}
			continue
		case string:
			if top != nil && top.keys != nil && top.expectKey {
				if top.keys[t] {
					return true
				}
				top.keys[t], top.expectKey = true, false
				continue
			}
		}
		if top != nil && top.keys != nil {
			top.expectKey = true
		}
	}
}
