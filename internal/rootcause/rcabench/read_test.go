package rcabench

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-otel/loom/internal/rootcause"
)

func TestReadLeaves(t *testing.T) {
	leaves, err := ReadLeaves(strings.NewReader("a,b,real,predict\na1,b1,10.5,12\na2,b1,0,0\n"), "case.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []rootcause.Leaf{
		{Terms: []rootcause.Term{{Dim: "a", Value: "a1"}, {Dim: "b", Value: "b1"}}, Real: 10.5, Predict: 12},
		{Terms: []rootcause.Term{{Dim: "a", Value: "a2"}, {Dim: "b", Value: "b1"}}},
	}
	if len(leaves) != len(want) {
		t.Fatalf("got %+v", leaves)
	}
	for i := range want {
		if leaves[i].Real != want[i].Real || leaves[i].Predict != want[i].Predict || !equalTerms(leaves[i].Terms, want[i].Terms) {
			t.Errorf("leaf %d: %+v, want %+v", i, leaves[i], want[i])
		}
	}
}

func equalTerms(a, b []rootcause.Term) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReadCounts(t *testing.T) {
	rows, err := ReadCounts(strings.NewReader("min,cdn,value,cnt,device\n60,c1,3,48,C3\n120,c2,0,2,C8\n"), "rs.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Minute != 60 || rows[0].Value != 3 || rows[0].Count != 48 ||
		!equalTerms(rows[1].Terms, []rootcause.Term{{Dim: "cdn", Value: "c2"}, {Dim: "device", Value: "C8"}}) {
		t.Errorf("got %+v", rows)
	}
}

func TestReadTruth(t *testing.T) {
	truths, err := ReadTruth(strings.NewReader("timestamp,set,noise_level\n344495,a=a3&e=e1;b=b2,0.21\n"), "injection_info.csv")
	if err != nil || len(truths) != 1 || truths[0] != (Truth{ID: "344495", Set: "a=a3&e=e1;b=b2"}) {
		t.Errorf("got %+v, %v", truths, err)
	}
	truths, err = ReadTruth(strings.NewReader("timestamp,set,at\n001,bitrate=500,1566397800\n"), "injection_info.csv")
	if err != nil || len(truths) != 1 || truths[0].At != "1566397800" {
		t.Errorf("at column: got %+v, %v", truths, err)
	}
}

// Errors name the file, the line and the column.
func TestReadErrorsNameTheSpot(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
		counts            bool
	}{
		{"not a number", "a,real,predict\na1,1,2\na2,x,2\n", `case.csv:3:4: column "real": not a number: "x"`, false},
		{"out of range", "a,real,predict\na1,1e300,2\n", `case.csv:2:4: column "real": "1e300" is out of range`, false},
		{"NaN", "a,real,predict\na1,1,NaN\n", `case.csv:2:6: column "predict": "NaN" is out of range`, false},
		{"no predict column", "a,real\na1,1\n", `case.csv:1: no "predict" column`, false},
		{"empty", "", "case.csv: empty file", false},
		{"ragged row", "a,real,predict\na1,1\n", "case.csv: record on line 2: wrong number of fields", false},
		{"unnamed dimension", "a,,real,predict\n", `case.csv:1:2: a dimension column without a name`, false},
		{"minute not an integer", "min,a,value,cnt\n1.5,a1,1,2\n", `case.csv:2:1: column "min": not an integer: "1.5"`, true},
		{"value above cnt", "min,a,value,cnt\n60,a1,3,2\n", `case.csv:2:7: column "value": value 3 exceeds cnt 2`, true},
	} {
		var err error
		if tc.counts {
			_, err = ReadCounts(strings.NewReader(tc.input), "case.csv")
		} else {
			_, err = ReadLeaves(strings.NewReader(tc.input), "case.csv")
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestOpenReadsGzipAndPlain(t *testing.T) {
	dir := t.TempDir()
	content := "a,real,predict\na1,1,2\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(content)); err != nil || zw.Close() != nil {
		t.Fatal("gzip", err)
	}
	// Told by the bytes, not the name.
	for name, data := range map[string][]byte{"plain.csv": []byte(content), "zipped.csv": gz.Bytes(), "zipped.csv.gz": gz.Bytes()} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		leaves, err := ReadLeaves(f, path)
		f.Close()
		if err != nil || len(leaves) != 1 || leaves[0].Predict != 2 {
			t.Errorf("%s: %+v, %v", name, leaves, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.gz"), []byte{0x1f, 0x8b, 0}, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "bad.gz")); err == nil || !strings.Contains(err.Error(), "bad.gz") {
		t.Errorf("a broken gzip: got %v", err)
	}
}

func FuzzReadLeaves(f *testing.F) {
	f.Add("a,b,real,predict\na1,b1,10.5,12\na2,b1,0,0\n")
	f.Add("real,predict,a\n1,2,\"x,y\"\n")
	f.Add("a,real,predict\na1,1e15,-1e15\n")
	f.Fuzz(func(t *testing.T, input string) {
		leaves, err := ReadLeaves(strings.NewReader(input), "fuzz.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		// What the reader accepts, the localizer takes without a panic.
		if _, err := rootcause.Localize(leaves, rootcause.Options{MaxLayer: 2}); err != nil && len(leaves) > 0 && len(leaves[0].Terms) > 0 {
			t.Logf("localize: %v", err)
		}
	})
}

func FuzzReadCounts(f *testing.F) {
	f.Add("min,cdn,value,cnt\n60,c1,3,48\n120,c1,40,48\n120,c2,0,2\n", int64(120))
	f.Add("min,a,value,cnt\n0,x,0,0\n60,x,1,1\n", int64(60))
	f.Fuzz(func(t *testing.T, input string, at int64) {
		rows, err := ReadCounts(strings.NewReader(input), "fuzz.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		leaves, err := rootcause.FromCounts(rows, at)
		if err != nil {
			return
		}
		for _, l := range leaves {
			if l.Sigma < 0 || l.Predict < 0 || l.Predict > l.Total {
				t.Errorf("leaf %+v", l)
			}
		}
		if _, err := rootcause.Localize(leaves, rootcause.Options{MaxLayer: 2}); err != nil && len(leaves) > 0 && len(leaves[0].Terms) > 0 {
			t.Logf("localize: %v", err)
		}
	})
}
