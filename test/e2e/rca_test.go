//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loom-otel/loom/internal/workload"
	"github.com/loom-otel/loom/internal/workload/foundry"
)

// TestRCAPageFromTheCollector runs the built collector's default config,
// sends loomgen's S1–S3 and reads the answer where a newcomer would: the
// URL the collector logs, the failing requests it lists, a request's page
// with its reasons and timeline.
func TestRCAPageFromTheCollector(t *testing.T) {
	col := startCollector(t, "distribution/config.yaml", withEdits())
	_, truths := sendWorkload(t, col, workload.GRPC, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3}, Affected: 0.2, Requests: 600, Seed: 5,
	})
	failed := map[string]bool{}
	for _, tr := range truths {
		failed[tr.ReqID] = tr.Failed
	}
	base := "http://" + col.endpoints["extensions.rca.endpoint"]
	if !strings.Contains(col.log(), "Root-cause page") {
		t.Errorf("the collector does not log the page's URL:\n%s", col.log())
	}

	listed := waitForFailing(t, base, 100, func(string) bool { return true })
	wrong := 0
	for _, id := range listed {
		if !failed[id] {
			wrong++
		}
	}
	if len(listed) < 100 || wrong > len(listed)/20 {
		t.Fatalf("the page lists %d failing requests, %d of them healthy by the ground truth; want at least 100, at most 5%% healthy; the collector's last warnings and errors:\n%s",
			len(listed), wrong, col.problems())
	}

	id := listed[0]
	var request struct {
		Failed  bool              `json:"failed"`
		Reasons []string          `json:"reasons"`
		Events  []json.RawMessage `json:"events"`
		Edges   []json.RawMessage `json:"edges"`
	}
	getJSON(t, base+"/api/requests/"+url.PathEscape(id), &request)
	if !request.Failed || len(request.Reasons) == 0 || len(request.Events) < 3 || len(request.Edges) == 0 {
		t.Errorf("request %s: failed %v, reasons %v, %d events, %d edges; want a failed request with its reasons, events and edges",
			id, request.Failed, request.Reasons, len(request.Events), len(request.Edges))
	}
	page := getBody(t, base+"/requests/"+url.PathEscape(id))
	for _, want := range []string{`<svg class="timeline"`, `class="bar`, request.Reasons[0]} {
		if !strings.Contains(page, want) {
			t.Errorf("the request's page lacks %q", want)
		}
	}
	if overview := getBody(t, base+"/"); !strings.Contains(overview, url.PathEscape(id)) {
		t.Errorf("the overview does not link to %s", id)
	}
	// The input map is the running reqsampling processor's.
	var inputs struct {
		Buckets []struct {
			Requests int `json:"requests"`
		} `json:"buckets"`
	}
	getJSON(t, base+"/api/inputs", &inputs)
	decided := 0
	for _, b := range inputs.Buckets {
		decided += b.Requests
	}
	if decided < len(truths)/2 {
		t.Errorf("the input map counts %d decided requests of the %d sent", decided, len(truths))
	}
}

// waitForFailing polls the page's failing requests until at least want of
// them pass count, or 90 s passed (they appear once sampling decided them,
// decision_wait after their last record), and returns the req_ids listed.
func waitForFailing(t *testing.T, base string, want int, count func(reqID string) bool) []string {
	t.Helper()
	var listed struct {
		Requests []struct {
			ReqID string `json:"req_id"`
		} `json:"requests"`
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		getJSON(t, base+"/api/failing", &listed)
		var ids []string
		counted := 0
		for _, r := range listed.Requests {
			ids = append(ids, r.ReqID)
			if count(r.ReqID) {
				counted++
			}
		}
		if counted >= want || time.Now().After(deadline) {
			return ids
		}
	}
}

func getBody(t *testing.T, u string) string {
	t.Helper()
	status, body := get(t, u)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", u, status, body)
	}
	return string(body)
}

// get fetches u and returns its status and body.
func get(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getBody(t, u)), v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// TestRCAComparisonShowsTheMissingField sends the foundry family's upgrade
// that stops writing a field, and checks that the comparison of a failing
// request with its nearest healthy one calls that field out at its top, as
// missing, at the stage the ground truth names.
func TestRCAComparisonShowsTheMissingField(t *testing.T) {
	col := startCollector(t, "distribution/config.yaml", withEdits())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var truthFile bytes.Buffer
	_, err := foundry.Run(ctx, foundry.Config{Incidents: []workload.Scenario{foundry.FieldDrop}, Affected: 0.12, Seed: 3,
		Pace: workload.Pace{Requests: 3000, Rate: 20000}},
		workload.Target{Endpoint: col.endpoints["receivers.otlp.protocols.grpc.endpoint"], Protocol: workload.GRPC, Insecure: true}, &truthFile)
	if err != nil {
		t.Fatalf("foundry: %v\ncollector log:\n%s", err, col.log())
	}
	missing := map[string]workload.Evidence{}
	for _, tr := range readTruth(t, truthFile.Bytes()) {
		for _, ev := range tr.Evidence {
			if ev.Kind == workload.EvidenceMissingField {
				missing[tr.ReqID] = ev
			}
		}
	}
	base := "http://" + col.endpoints["extensions.rca.endpoint"]
	var id string
	for _, listed := range waitForFailing(t, base, 1, func(id string) bool { _, ok := missing[id]; return ok }) {
		if _, ok := missing[listed]; ok {
			id = listed
			break
		}
	}
	if id == "" {
		t.Fatal("none of the failing requests listed lost a field by the ground truth")
	}
	var cmp struct {
		Good        string `json:"good"`
		Differences []struct {
			Kind, Stage, Field string
		} `json:"differences"`
	}
	getJSON(t, base+"/api/requests/"+url.PathEscape(id)+"/compare", &cmp)
	// Missing fields come first; the dropped one among the first three (a
	// field the healthy request's records carry by chance may come before it).
	want := missing[id]
	found := false
	for _, d := range cmp.Differences[:min(len(cmp.Differences), 3)] {
		found = found || d.Kind == "missing" && d.Field == want.Attribute && d.Stage == want.Stage
	}
	if cmp.Good == "" || !found || cmp.Differences[0].Kind != "missing" {
		t.Errorf("comparing %s with %q: first differences %+v; want %s missing at %s among the first three", id, cmp.Good,
			cmp.Differences[:min(len(cmp.Differences), 3)], want.Attribute, want.Stage)
	}
	if page := getBody(t, base+"/requests/"+url.PathEscape(id)+"/compare"); !strings.Contains(page, `<tr class="missing">`) {
		t.Error("the comparison page does not call the missing field out")
	}
}
