//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loom-otel/loom/internal/workload"
)

// TestRCAPageInABrowser opens the rca page of the built collector in a real
// headless Chromium, as an on-call engineer would after sending S1–S3: the
// failing requests, then the ranking, whose top cause must be a ground
// truth, from it to one of its failing requests, its reasons and timeline,
// then to its comparison with the nearest healthy request. Screenshots go to
// bin/artifacts/rca (LOOM_ARTIFACTS overrides the folder).
func TestRCAPageInABrowser(t *testing.T) {
	browser, err := findChromium()
	if err != nil {
		t.Fatal(err) // `make test-deps` installs Debian's chromium
	}
	col := startCollector(t, "distribution/config.yaml", withHealthyBaseline)
	_, truths := sendWorkload(t, col, workload.GRPC, workload.Config{
		Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3}, Affected: 0.2, Requests: 600, Seed: 9,
	})
	failed := map[string]bool{}
	for _, tr := range truths {
		failed[tr.ReqID] = tr.Failed
	}
	base := "http://" + col.endpoints["extensions.rca.endpoint"]
	// The page is read once: the healthy requests must be in the graph.
	rankAfterDecisions(t, col, 20)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browserCtx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	// The first run starts the browser, which lives as long as its context:
	// only the steps after it have a timeout.
	if err := chromedp.Do(browserCtx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}
	artifacts := artifactsDir(t)
	var topCause, first, reqID, reasons, differences string
	var overview, ranking, request, compare []byte
	steps := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"the overview lists failing requests", inBrowser(
			chromedp.WaitVisible(`table a.mono`),
			into(&overview, chromedp.FullScreenshot(100)))},
		{"the ranking shows a cause with examples", inBrowser(
			chromedp.Navigate(base+"/rootcause"),
			chromedp.WaitVisible(`#candidates a.example`),
			into(&topCause, chromedp.Text(`#candidates li.candidate`)),
			into(&first, chromedp.Text(`#candidates a.example`)),
			into(&ranking, chromedp.FullScreenshot(100)))},
		{"clicking the top cause's first example", clickThrough(`#candidates a.example`)},
		{"the request page shows its timeline and reasons", inBrowser(
			chromedp.WaitVisible(`svg.timeline`),
			into(&reqID, chromedp.Text(`h1 .mono`)),
			into(&reasons, chromedp.Text(`ul.reasons`)),
			into(&request, chromedp.FullScreenshot(100)))},
		{"clicking compare", clickThrough(`#compare`)},
		{"the comparison page", inBrowser(
			chromedp.WaitVisible(`main h1`),
			into(&differences, chromedp.Text(`main`)),
			into(&compare, chromedp.FullScreenshot(100)))},
	}
	for _, step := range steps {
		ctx, cancelStep := context.WithTimeout(browserCtx, time.Minute)
		err := step.run(ctx)
		cancelStep()
		if err != nil {
			t.Fatalf("%s: %v\n%s\ncollector log:\n%s", step.name, err, pageState(browserCtx), col.log())
		}
	}
	for name, shot := range map[string][]byte{"overview.png": overview, "rootcause.png": ranking, "request.png": request, "compare.png": compare} {
		if err := os.WriteFile(filepath.Join(artifacts, name), shot, 0o600); err != nil {
			t.Error(err)
		}
	}
	t.Logf("screenshots in %s", artifacts)
	if strings.TrimSpace(first) != strings.TrimSpace(reqID) {
		t.Errorf("clicked %q, landed on %q", first, reqID)
	}
	if !failed[strings.TrimSpace(reqID)] {
		t.Errorf("the first example of the top cause, %s, did not fail by the ground truth", reqID)
	}
	named := false
	for _, tr := range truths {
		if tr.RootCause != nil {
			dim, value := truthTerm(tr.RootCause)
			named = named || strings.Contains(topCause, dim+"="+value)
		}
	}
	if !named {
		t.Errorf("the top cause names no ground truth of S1–S3:\n%s", topCause)
	}
	if strings.TrimSpace(reasons) == "" {
		t.Error("the request's page shows no reason")
	}
	if !strings.Contains(differences, "beside healthy") && !strings.Contains(differences, "no healthy request near") {
		t.Errorf("the comparison page shows neither a healthy request nor why there is none:\n%s", differences)
	}
}

// findChromium is Debian's chromium, or another Chrome on the PATH.
func findChromium() (string, error) {
	var err error
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		var path string
		if path, err = exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", err
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv("LOOM_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot, "bin", "artifacts", "rca")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return dir
}

// into runs a and keeps its value in dst, so that several steps run in one Do.
func into[T any](dst *T, a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		v, err := a(ctx, t)
		*dst = v
		return chromedp.Void{}, err
	}
}

// inBrowser runs the actions as one step.
func inBrowser(actions ...chromedp.Action[chromedp.Void]) func(ctx context.Context) error {
	return func(ctx context.Context) error { return chromedp.Do(ctx, actions...) }
}

// clickThrough clicks a link and waits for the page it opens to load: a
// query run right after a bare click can start on the old document and, on
// a loaded machine, wait on it forever.
func clickThrough(selector string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		_, err := chromedp.RunResponse(ctx, chromedp.Click(selector))
		return err
	}
}

// pageState is where the browser is and the start of what it shows, for a
// step that failed.
func pageState(browserCtx context.Context) string {
	ctx, cancel := context.WithTimeout(browserCtx, 10*time.Second)
	defer cancel()
	var location, text string
	if err := chromedp.Do(ctx, into(&location, chromedp.Location()), into(&text, chromedp.Text(`body`))); err != nil {
		return fmt.Sprintf("the page at %q could not be read: %v", location, err)
	}
	const most = 2000
	if len(text) > most {
		text = text[:most] + "…"
	}
	return fmt.Sprintf("the page at %s shows:\n%s", location, text)
}
