package extract

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var (
	testKeys     = []string{"stage", "latency_ms", "tokens"}
	testPatterns = []string{`\b(?P<req_id>req[-_][a-z_-]*[0-9][0-9A-Za-z_-]*)`}
)

func TestText(t *testing.T) {
	x, err := NewText(testKeys, testPatterns)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ text, want string }{
		{"[req-1715234890123-a1b2c3] normalized input tokens=523", `req_id="req-1715234890123-a1b2c3" tokens="523"`},
		{"task req-celery-0f8fad5b-d9cb-469f-a165-70867728950e started stage: celery/task_start", `req_id="req-celery-0f8fad5b-d9cb-469f-a165-70867728950e" stage="celery/task_start"`},
		{"req_id=req_1715234890123_beef latency_ms = 2340, substage=x my.stage=y", `req_id="req_1715234890123_beef" latency_ms="2340"`},
		{`stage="model / forward" done`, `stage="model / forward"`},
		{"Traceback (most recent call last):\n  File \"w.py\", line 3, in run [req-1715234890123-zzzzzz]\nRuntimeError: CUDA error", `req_id="req-1715234890123-zzzzzz"`},
		{"no fields here, requested by request_id", ``},
	}
	for _, tt := range tests {
		fields, _ := x.Extract(tt.text, 64, nil)
		if got := strings.Join(flat(fields), " "); got != tt.want {
			t.Errorf("Extract(%q)\n got %s\nwant %s", tt.text, got, tt.want)
		}
	}
	if fields, limited := x.Extract("stage=a tokens=1", 1, nil); len(fields) != 1 || limited != LimitedFields {
		t.Errorf("field limit: %d fields, limited %b", len(fields), limited)
	}
}

func TestNewTextErrors(t *testing.T) {
	for _, tt := range []struct {
		keys, patterns []string
		want           string
	}{
		{[]string{""}, nil, "key 0 is empty"},
		{nil, []string{`(?P<a>x)`, `(`}, "pattern 1"},
		{nil, []string{`req-\d+`}, "no named capture group"},
		{[]string{"\xff"}, nil, "not UTF-8"},
		{[]string{"stage", "my key"}, nil, "key 1 (\"my key\") holds a space"},
		{[]string{"a=b"}, nil, "'='"},
	} {
		if _, err := NewText(tt.keys, tt.patterns); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewText(%q, %q) error = %v; want %q", tt.keys, tt.patterns, err, tt.want)
		}
	}
}

func FuzzText(f *testing.F) {
	x, err := NewText(testKeys, testPatterns)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		"[req-1715234890123-a1b2c3] normalized input tokens=523", `stage="a\"b" latency_ms:12`, "req_\xff1", "stage=\"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		fields, _ := x.Extract(text, 1<<20, nil)
		for _, f := range fields {
			if f.Start < 0 || f.End > len(text) || f.Start >= f.End {
				t.Fatalf("Extract(%q): bad offsets in %+v", text, f)
			}
			if raw := text[f.Start:f.End]; raw != f.Str && !strings.HasPrefix(raw, `"`) {
				t.Fatalf("Extract(%q): value %q is not the text %q at its offsets", text, f.Str, raw)
			}
		}
	})
}

// keysRegexp is the regular expression Text's key scanner replaced: the
// fuzz target holds the scanner to it.
func keysRegexp(keys []string) *regexp.Regexp {
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = regexp.QuoteMeta(k)
	}
	return regexp.MustCompile(`(?:^|[^\w.\-])(` + strings.Join(quoted, "|") + `)[ \t]*[=:][ \t]*("(?:[^"\\\n]|\\.)*"|[^\s,;"'()\[\]{}]+)`)
}

func FuzzTextKeysAgreeWithTheRegexp(f *testing.F) {
	// Keys that end alike, nest, hold the characters a name may and may
	// not continue with, and a multibyte one.
	keys := []string{"stage", "stage_x", "x/y", "y", "a.b", "b", "k-1", "größe", "latency_ms"}
	x, err := NewText(keys, nil)
	if err != nil {
		f.Fatal(err)
	}
	re := keysRegexp(keys)
	for _, seed := range []string{
		"stage=a stage_x: b", "x/y=1 ax/y=2 /y=3", `a.b="q\"x" b="\`, "stage = = 1,latency_ms:=2;", "größe: 3 \xffstage=4",
		"stage=\"open\nstage=5", "y:y:y:1", `stage="a"stage=b`, "latency_ms\t=\t17 k-1:(x)", "substage=1 my.stage=2 -stage=3 @stage=4",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var want []Field
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			want = append(want, Field{Key: text[m[2]:m[3]], Kind: String, Str: unquote(text[m[4]:m[5]]), Start: m[4], End: m[5]})
		}
		got, _ := x.Extract(text, 1<<20, nil)
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Extract(%q)\n got %+v\nwant %+v (the regexp)", text, got, want)
		}
	})
}

// A pattern that starts with a literal is searched for from the literal's
// first occurrence, with the same matches as the whole text gives.
func FuzzTextPatternsAgreeWithTheRegexp(f *testing.F) {
	patterns := []string{
		`\b(?P<req_id>req[-_][a-z_-]*[0-9][0-9A-Za-z_-]*)`, `(?m)^(?P<a>ab+)`, `^(?P<a>ab)`, `\Bé(?P<e>x*)`,
		`(?P<k>aa)a`, `(?i)(?P<c>req)`, `(?P<alt>ab|cd)`, `\A\b(?:(?P<n>x)y)`,
	}
	for _, p := range patterns {
		f.Add(p, "ab req-1 xreq_a2 \nabb aaaa éx béxx cd xy")
	}
	f.Add(patterns[0], "req-abc req_9")
	f.Fuzz(func(t *testing.T, p, text string) {
		re, err := regexp.Compile(p)
		if err != nil {
			return
		}
		want := re.FindStringSubmatchIndex(text)
		if got := (pattern{re, literalStart(p)}).find(text); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s on %q: got %v, want %v (start %q)", p, text, got, want, literalStart(p))
		}
	})
}

func TestLiteralStart(t *testing.T) {
	for p, want := range map[string]string{
		`\b(?P<req_id>req[-_][a-z_-]*[0-9])`: "req", `^ab`: "ab", `(?m)^\Bx`: "x", `(?i)ab`: "", `a|b`: "", `a*b`: "", `\b`: "", `é+`: "",
	} {
		if got := literalStart(p); got != want {
			t.Errorf("literalStart(%s) = %q, want %q", p, got, want)
		}
	}
}
