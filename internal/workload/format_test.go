package workload

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

func TestJSONBody(t *testing.T) {
	tricky := "line one\nsays \"hi\" \\ tab\there \x01 🔥 end"
	var l line
	body := l.reset().text("{").jsonStr("msg", tricky).jsonInt("n", -42).jsonFloat("f", 1.25, 2).text("}").String()
	var got struct {
		Msg string  `json:"msg"`
		N   int     `json:"n"`
		F   float64 `json:"f"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%s is not JSON: %v", body, err)
	}
	if got.Msg != tricky || got.N != -42 || got.F != 1.25 {
		t.Fatalf("round trip of %s gave %+v", body, got)
	}
}

func TestLogfmtBody(t *testing.T) {
	var l line
	got := l.reset().kv("level", "info").kv("msg", `token "ok" verified`).kv("empty", "").kvInt("n", 7).kvFloat("x", 1.5, 1).String()
	want := `level=info msg=` + strconv.Quote(`token "ok" verified`) + ` empty="" n=7 x=1.5`
	if got != want {
		t.Fatalf("logfmt = %s, want %s", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Scenarios: []Scenario{Healthy}, Requests: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	for name, c := range map[string]Config{
		"no scenario":    {Requests: 1},
		"unknown":        {Scenarios: []Scenario{"s9"}, Requests: 1},
		"affected > 1":   {Scenarios: []Scenario{S1}, Affected: 1.5, Requests: 1},
		"affected < 0":   {Scenarios: []Scenario{S1}, Affected: -0.1, Requests: 1},
		"no limit":       {Scenarios: []Scenario{Healthy}},
		"negative limit": {Scenarios: []Scenario{Healthy}, Duration: -time.Second},
		"negative rate":  {Scenarios: []Scenario{Healthy}, Requests: 1, Rate: -1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: %+v accepted", name, c)
		}
	}
}

func TestParseScenarios(t *testing.T) {
	got, err := ParseScenarios(" S1, s3 ")
	if err != nil || len(got) != 2 || got[0] != S1 || got[1] != S3 {
		t.Fatalf("ParseScenarios = %v, %v", got, err)
	}
	for _, bad := range []string{"", ",", "s1,s4"} {
		if _, err := ParseScenarios(bad); err == nil {
			t.Errorf("ParseScenarios(%q) accepted", bad)
		}
	}
}

func TestTargetValidate(t *testing.T) {
	if err := (Target{Endpoint: "127.0.0.1:4317", Protocol: GRPC}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Target{{Endpoint: "127.0.0.1", Protocol: GRPC}, {Endpoint: "127.0.0.1:4318", Protocol: "udp"}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	for endpoint, want := range map[string]bool{"127.0.0.1:4317": true, "localhost:4318": true, "[::1]:4317": true, "collector:4317": false, "10.0.0.1:4317": false} {
		if IsLoopback(endpoint) != want {
			t.Errorf("IsLoopback(%q) = %v", endpoint, !want)
		}
	}
}
