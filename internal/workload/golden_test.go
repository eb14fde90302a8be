package workload

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/loom-otel/loom/internal/golden"
)

// fields is the golden-field view of one record, read the way the contract
// reads it (ARCHITECTURE.md §2): attributes and body fields under their
// canonical names. A value is a string or, for numbers, a float64.
type fields struct {
	values   map[string]any
	viaAlias map[string]bool // canonical names whose value came from an alias
}

func newFields() *fields { return &fields{values: map[string]any{}, viaAlias: map[string]bool{}} }

// aliased reports whether some golden field was found only under an alias.
func (f *fields) aliased() bool {
	for k := range f.viaAlias {
		if k == golden.ReqID || k == golden.ModelVer || golden.IsResourceUsage(k) {
			return true
		}
	}
	return false
}

var (
	contractAliases = golden.DefaultAliases()
	// bodyPair is a key=value pair of a logfmt or plain-text body.
	bodyPair = regexp.MustCompile(`(?:^|[\s\]])([A-Za-z_][\w.]*)=("(?:[^"\\]|\\.)*"|[^\s"]+)`)
	// bodyReqID is the [req-…] prefix of a plain-text body.
	bodyReqID  = regexp.MustCompile(`^\[(req-[^\]\s]+)\]`)
	stagePath  = regexp.MustCompile(`^[a-z0-9_]+(/[a-z0-9_]+)+$`)
	goldenKeys = []string{golden.ReqID, golden.Stage, golden.InputHash, golden.ModelVer}
)

// put records k=v; an alias is stored under its canonical name unless the
// canonical name is already there (a canonical name wins, as in the processor).
func (f *fields) put(k string, v any) {
	canonical, alias := contractAliases[k]
	if !alias {
		f.values[k] = v
		delete(f.viaAlias, k)
		return
	}
	if _, exists := f.values[canonical]; !exists {
		f.values[canonical] = v
		f.viaAlias[canonical] = true
	}
}

func attrFields(attrs []attribute.KeyValue) *fields {
	f := newFields()
	addAttrs(f, attrs)
	return f
}

func addAttrs(f *fields, attrs []attribute.KeyValue) {
	for _, kv := range attrs {
		switch kv.Value.Type() {
		case attribute.INT64:
			f.put(string(kv.Key), float64(kv.Value.AsInt64()))
		case attribute.FLOAT64:
			f.put(string(kv.Key), kv.Value.AsFloat64())
		default:
			f.put(string(kv.Key), kv.Value.String())
		}
	}
}

// logFields reads a log record: its attributes, then its body as a JSON
// object, or else as logfmt / plain text key=value pairs with an optional
// [req-…] prefix.
func logFields(t *testing.T, l Log) *fields {
	f := newFields()
	addAttrs(f, l.Attrs)
	if strings.HasPrefix(l.Body, "{") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(l.Body), &obj); err != nil {
			t.Fatalf("%s logged invalid JSON %s: %v", l.Service.Instance, l.Body, err)
		}
		for k, v := range obj {
			f.put(k, v)
		}
		return f
	}
	if m := bodyReqID.FindStringSubmatch(l.Body); m != nil {
		f.put(golden.ReqID, m[1])
	}
	for _, m := range bodyPair.FindAllStringSubmatch(l.Body, -1) {
		v := m[2]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		f.put(m[1], v)
	}
	return f
}

// usage returns the first resource_usage.* fact of f that is a number.
func (f *fields) usage() (string, bool) {
	for k, v := range f.values {
		if !golden.IsResourceUsage(k) {
			continue
		}
		switch v := v.(type) {
		case float64:
			return k, true
		case string:
			if _, err := strconv.ParseFloat(v, 64); err == nil {
				return k, true
			}
		}
	}
	return "", false
}

func (f *fields) str(k string) (string, bool) {
	v, ok := f.values[k]
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	return s, isStr
}

// checkGolden fails unless f carries the golden five of request r: its
// req_id, a stage path, its input_hash, the model_ver that served it (absent
// only where no model ran: the failing tasks of S3) and a resource_usage number.
func checkGolden(t *testing.T, r *Request, what string, f *fields) {
	t.Helper()
	tr := r.Truth
	if v, _ := f.str(golden.ReqID); v != tr.ReqID {
		t.Fatalf("%s of %s (%s): req_id %q, want %q; fields %v", what, tr.ReqID, tr.Scenario, v, tr.ReqID, f.values)
	}
	if v, _ := f.str(golden.Stage); !stagePath.MatchString(v) {
		t.Fatalf("%s of %s (%s): stage %q is not a lowercase path; fields %v", what, tr.ReqID, tr.Scenario, v, f.values)
	}
	if v, _ := f.str(golden.InputHash); v != tr.InputHash {
		t.Fatalf("%s of %s (%s): input_hash %q, want %q; fields %v", what, tr.ReqID, tr.Scenario, v, tr.InputHash, f.values)
	}
	ver, hasVer := f.str(golden.ModelVer)
	switch {
	case tr.ModelVer == "" && tr.Scenario != S3:
		t.Fatalf("%s (%s) names no model in its truth", tr.ReqID, tr.Scenario)
	case tr.ModelVer == "" && hasVer:
		t.Fatalf("%s of %s (%s): model_ver %q, but no model ran", what, tr.ReqID, tr.Scenario, ver)
	case tr.ModelVer != "" && ver != tr.ModelVer:
		t.Fatalf("%s of %s (%s): model_ver %q, want %q; fields %v", what, tr.ReqID, tr.Scenario, ver, tr.ModelVer, f.values)
	}
	if _, ok := f.usage(); !ok {
		t.Fatalf("%s of %s (%s): no numeric resource_usage.* fact; fields %v", what, tr.ReqID, tr.Scenario, f.values)
	}
}

// TestGoldenFieldsOnSignalRecords: every span and every log line that names a
// stage carries the golden five, in the service's own spelling (aliases
// allowed); template noise lines name no stage and carry neither input_hash
// nor model_ver. Incident requests are held to the same rule: S1 and S2 change
// values, not fields, and S3's failing tasks lack only model_ver (no model ran).
func TestGoldenFieldsOnSignalRecords(t *testing.T) {
	for name, cfg := range map[string]Config{
		"healthy": {Scenarios: []Scenario{Healthy}, Seed: 5},
		"mixed":   {Scenarios: []Scenario{Healthy, S1, S2, S3}, Affected: 0.3, Seed: 17},
	} {
		t.Run(name, func(t *testing.T) {
			reqs, _ := generate(t, cfg, 4000)
			var logs, stageLogs, noReqID, aliasedSpans, aliasedLogs int
			scenarios := map[Scenario]int{}
			for _, r := range reqs {
				scenarios[r.Truth.Scenario]++
				for _, s := range r.Spans {
					f := attrFields(s.Attrs)
					checkGolden(t, r, "span "+s.Name, f)
					if stage, _ := f.str(golden.Stage); stagePath.MatchString(s.Name) && stage != s.Name {
						t.Fatalf("span %s has stage %q", s.Name, stage)
					}
					if f.aliased() {
						aliasedSpans++
					}
				}
				for _, l := range r.Logs {
					logs++
					if !strings.Contains(l.Body, r.Truth.ReqID) && len(l.Attrs) == 0 {
						noReqID++
					}
					f := logFields(t, l)
					if _, named := f.values[golden.Stage]; !named {
						// Template noise: no stage, and none of the other golden fields but req_id.
						for _, k := range goldenKeys[2:] {
							if v, ok := f.values[k]; ok {
								t.Fatalf("noise line of %s carries %s=%v: %s", l.Service.Instance, k, v, l.Body)
							}
						}
						continue
					}
					stageLogs++
					checkGolden(t, r, "log of "+l.Service.Instance+" "+strconv.Quote(l.Body), f)
					if f.aliased() {
						aliasedLogs++
					}
				}
			}
			t.Logf("%d requests %v: %d logs, %.0f%% name a stage, %.0f%% carry no req_id; golden fields under an alias on %d spans, %d logs",
				len(reqs), scenarios, logs, 100*float64(stageLogs)/float64(logs), 100*float64(noReqID)/float64(logs), aliasedSpans, aliasedLogs)
			if aliasedSpans == 0 || aliasedLogs == 0 {
				t.Errorf("no span (%d) or no log (%d) spells a golden field by an alias; services write their own names", aliasedSpans, aliasedLogs)
			}
			if name == "healthy" {
				// About 70% of the lines are template noise, and 9% carry no req_id at all.
				if share := float64(stageLogs) / float64(logs); share < 0.2 || share > 0.4 {
					t.Errorf("%.0f%% of the log lines name a stage; want ~30%%, the rest template noise", 100*share)
				}
				if share := float64(noReqID) / float64(logs); share < 0.05 || share > 0.13 {
					t.Errorf("%.0f%% of the log lines carry no req_id; want ~9%%", 100*share)
				}
			}
		})
	}
}

// TestFieldsParse pins the test's own body parser on the formats the services print.
func TestFieldsParse(t *testing.T) {
	svc := &Service{Instance: "x"}
	for body, want := range map[string]map[string]any{
		`{"stage":"model/forward","request_id":"req-1","model_name":"m","duration_ms":812}`: {
			golden.Stage: "model/forward", golden.ReqID: "req-1", golden.ModelVer: "m", golden.LatencyMs: 812.0},
		`level=info stage=postproc/filter x_request_id=req-2 msg="a b=c" gpu_mem_mb=10`: {
			golden.Stage: "postproc/filter", golden.ReqID: "req-2", "msg": "a b=c", golden.GPUMemMb: "10"},
		`[req-3] stage=preproc/normalize tokens=523 model_name=m`: {
			golden.ReqID: "req-3", golden.Stage: "preproc/normalize", golden.Tokens: "523", golden.ModelVer: "m"},
	} {
		f := logFields(t, Log{Service: svc, Body: body})
		for k, v := range want {
			if f.values[k] != v {
				t.Errorf("%s: %s = %v, want %v (all: %v)", body, k, f.values[k], v, f.values)
			}
		}
	}
	f := attrFields([]attribute.KeyValue{attribute.String("model", "b"), attribute.String(golden.ModelVer, "a")})
	if f.values[golden.ModelVer] != "a" || f.aliased() {
		t.Errorf("the canonical name must win over an alias: %v", f.values)
	}
}
