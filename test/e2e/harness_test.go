//go:build e2e

// Package e2e drives the built otelcol-loom binary end to end: it starts the
// collector on free loopback ports with a config derived from a shipped one,
// sends it telemetry, and reads back what it exported through an in-process
// OTLP sink.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loom-otel/loom/internal/otlpsink"
	"github.com/loom-otel/loom/internal/workload"
)

// repoRoot is the repository root, two levels above this package.
var repoRoot = func() string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return root
}()

// collectorBin is the binary under test: $LOOM_BIN, or bin/otelcol-loom built once per run.
var collectorBin string

func TestMain(m *testing.M) {
	collectorBin = os.Getenv("LOOM_BIN")
	if collectorBin == "" {
		build := exec.Command("make", "--no-print-directory", "build")
		build.Dir = repoRoot
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: building the collector failed: %v\n", err)
			os.Exit(1)
		}
		collectorBin = filepath.Join(repoRoot, "bin", "otelcol-loom")
	}
	os.Exit(m.Run())
}

// syncBuffer collects the collector's output from two pipes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// collector is one running otelcol-loom process.
type collector struct {
	t       testing.TB
	cmd     *exec.Cmd
	out     *syncBuffer
	exited  chan struct{}
	waitErr error
	// endpoints maps the config path of each rewritten listener (e.g.
	// "receivers.otlp.protocols.grpc.endpoint") to the address it got.
	endpoints map[string]string
	// dir is the collector's working directory: relative paths in its config
	// (the embedded event graph's ./data) land there.
	dir      string
	stopOnce sync.Once
}

// runCollector runs a one-shot subcommand of the binary (validate, components)
// and returns its combined output.
func runCollector(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, collectorBin, args...).CombinedOutput()
	return string(out), err
}

// startCollector starts the binary with the shipped config at configPath
// (relative to the repository root), edit applied to the parsed config and
// then every loopback listener moved to a free port. It waits until health_check
// reports ready and stops the collector when the test ends.
func startCollector(t testing.TB, configPath string, edit func(cfg map[string]any)) *collector {
	t.Helper()
	return launchCollector(t, renderConfig(t, configPath, edit), t.TempDir())
}

// renderedConfig is a config written for one test, with its listeners on the
// free ports they were given.
type renderedConfig struct {
	path           string
	endpoints      map[string]string
	healthEndpoint string
}

// renderConfig reads the shipped config at configPath, applies edit, moves
// every loopback listener to a free port and writes the result to a temporary file.
func renderConfig(t testing.TB, configPath string, edit func(cfg map[string]any)) renderedConfig {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, configPath))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", configPath, err)
	}
	if edit != nil {
		edit(cfg)
	}
	endpoints := map[string]string{}
	movePorts(t, cfg, "", endpoints)
	health, ok := endpoints["extensions.health_check.endpoint"]
	if !ok {
		t.Fatalf("%s has no health_check endpoint on loopback: the harness needs it to know when the collector is ready", configPath)
	}
	rendered, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, rendered, 0o600); err != nil {
		t.Fatal(err)
	}
	return renderedConfig{path: path, endpoints: endpoints, healthEndpoint: health}
}

// launchCollector runs the binary on cfg in the working directory dir, waits
// until it is ready and stops it when the test ends.
func launchCollector(t testing.TB, cfg renderedConfig, dir string) *collector {
	t.Helper()
	c := &collector{t: t, out: &syncBuffer{}, exited: make(chan struct{}), endpoints: cfg.endpoints, dir: dir}
	c.cmd = exec.Command(collectorBin, "--config", cfg.path)
	c.cmd.Dir = c.dir
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(c.stop)
	c.waitReady(cfg.healthEndpoint, 60*time.Second)
	return c
}

func (c *collector) waitReady(healthEndpoint string, timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			c.t.Fatalf("collector exited during start-up (%v); its log:\n%s", c.waitErr, c.out)
		default:
		}
		resp, err := client.Get("http://" + healthEndpoint + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("collector not ready after %s; its log:\n%s", timeout, c.out)
}

// stop sends SIGTERM and fails the test, with the collector's log, unless it
// exits cleanly in time.
func (c *collector) stop() {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
			if c.waitErr != nil {
				c.t.Errorf("collector exited with %v; its log:\n%s", c.waitErr, c.out)
			}
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
			c.t.Errorf("collector did not stop within 30s of SIGTERM; its log:\n%s", c.out)
		}
	})
}

// kill sends SIGKILL, as an OOM kill or a node loss would, and waits until
// the process is gone; the stop at the end of the test then does nothing.
func (c *collector) kill() {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
}

// restartableCollector is one collector config that a test kills and starts
// again: every run has the same ports, the same working directory and so the
// same storage.
type restartableCollector struct {
	t      testing.TB
	config renderedConfig
	dir    string
	// runs are the processes started so far, the last one current.
	runs []*collector
}

// startRestartableCollector is startCollector for a collector the test will
// kill and restart.
func startRestartableCollector(t testing.TB, configPath string, edit func(cfg map[string]any)) *restartableCollector {
	t.Helper()
	r := &restartableCollector{t: t, config: renderConfig(t, configPath, edit), dir: t.TempDir()}
	r.start()
	return r
}

// start runs a new process on the same config and waits until it is ready.
func (r *restartableCollector) start() {
	r.t.Helper()
	r.runs = append(r.runs, launchCollector(r.t, r.config, r.dir))
}

// kill SIGKILLs the current process and waits until it is gone.
func (r *restartableCollector) kill() { r.current().kill() }

// stop stops the current process gracefully (SIGTERM).
func (r *restartableCollector) stop() { r.current().stop() }

// current is the process started last.
func (r *restartableCollector) current() *collector { return r.runs[len(r.runs)-1] }

// log is the output of every run so far, each under a header.
func (r *restartableCollector) log() string {
	var b strings.Builder
	for i, run := range r.runs {
		fmt.Fprintf(&b, "--- run %d ---\n%s", i+1, run.log())
	}
	return b.String()
}

// log is the collector's output so far.
func (c *collector) log() string { return c.out.String() }

// problems is the collector's last 20 warnings and errors, for a failure's message.
func (c *collector) problems() string {
	var lines []string
	for line := range strings.Lines(c.log()) {
		if strings.Contains(line, "\twarn\t") || strings.Contains(line, "\terror\t") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-20):], "")
}

// dialOTLP connects to the collector's OTLP gRPC receiver; the connection
// closes with the test.
func (c *collector) dialOTLP() *grpc.ClientConn {
	conn, err := grpc.NewClient(c.endpoints["receivers.otlp.protocols.grpc.endpoint"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

var loopbackAddr = regexp.MustCompile(`^(127\.0\.0\.1|localhost|\[::1\]):\d+$`)

// movePorts rewrites every loopback listener in cfg (an `endpoint: host:port`
// value, or a `host`/`port` pair such as the collector's own telemetry reader)
// to a free port, recording where each went. Exporters dial out, their
// endpoints stay as they are, but for the prometheus exporter's, which is
// scraped: a collector running beside the tests may hold its usual port.
func movePorts(t testing.TB, node any, path string, moved map[string]string) {
	if path == "exporters" {
		if exporters, ok := node.(map[string]any); ok {
			for id, exporter := range exporters {
				if id == "prometheus" || strings.HasPrefix(id, "prometheus/") {
					movePorts(t, exporter, path+"."+id, moved)
				}
			}
		}
		return
	}
	switch n := node.(type) {
	case map[string]any:
		if host, ok := n["host"].(string); ok && isLoopbackHost(host) {
			if _, ok := n["port"].(int); ok {
				port := freePort(t)
				n["port"] = port
				moved[path+".port"] = net.JoinHostPort(host, strconv.Itoa(port))
			}
		}
		for key, value := range n {
			childPath := key
			if path != "" {
				childPath = path + "." + key
			}
			if s, ok := value.(string); ok && key == "endpoint" && loopbackAddr.MatchString(s) {
				addr := s
				if host, port, _ := net.SplitHostPort(s); !wasHandedOut(port) { // else the test chose it
					addr = net.JoinHostPort(host, strconv.Itoa(freePort(t)))
				}
				n[key] = addr
				moved[childPath] = addr
				continue
			}
			movePorts(t, value, childPath, moved)
		}
	case []any:
		for i, value := range n {
			movePorts(t, value, fmt.Sprintf("%s[%d]", path, i), moved)
		}
	}
}

func isLoopbackHost(host string) bool {
	return host == "127.0.0.1" || host == "localhost" || host == "::1"
}

// handedOut holds every port freePort returned in this run: the kernel may
// offer a just-closed port again, and two listeners of one collector must not
// get the same one.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// wasHandedOut reports whether freePort returned port (decimal) in this run.
func wasHandedOut(port string) bool {
	n, err := strconv.Atoi(port)
	handedOut.Lock()
	defer handedOut.Unlock()
	return err == nil && handedOut.ports[n]
}

func freePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}

// mapAt returns the map at a dotted path in cfg, creating missing levels.
func mapAt(cfg map[string]any, path ...string) map[string]any {
	node := cfg
	for _, key := range path {
		next, ok := node[key].(map[string]any)
		if !ok {
			next = map[string]any{}
			node[key] = next
		}
		node = next
	}
	return node
}

// withEdits applies several config edits in order.
func withEdits(edits ...func(map[string]any)) func(map[string]any) {
	return func(cfg map[string]any) {
		for _, edit := range edits {
			edit(cfg)
		}
	}
}

// keepEveryRequest makes the default config's reqsampling keep every request
// after a short wait, for tests that follow every record through the pipeline.
func keepEveryRequest(cfg map[string]any) {
	sampling := mapAt(cfg, "processors", "reqsampling")
	sampling["base_percentage"] = 100
	sampling["decision_wait"] = "1s"
}

// withHealthyBaseline keeps a tenth of the healthy requests instead of the
// default 1%: the ranking compares failing requests with the kept healthy
// ones, each standing for the requests sampling let it stand for, and the
// test workloads' few thousand requests leave only a dozen healthy ones at
// 1%. Which dozen then decides the ranking (totals estimated at 408 to 717
// for the same 600 requests).
func withHealthyBaseline(cfg map[string]any) {
	mapAt(cfg, "processors", "reqsampling")["base_percentage"] = 10
}

// sendWorkload runs the workload generator against col's OTLP receiver and
// returns what it sent and the ground truth of every request.
func sendWorkload(t *testing.T, col *collector, protocol workload.Protocol, cfg workload.Config) (workload.Summary, []workload.Truth) {
	t.Helper()
	endpoint := col.endpoints["receivers.otlp.protocols.grpc.endpoint"]
	if protocol == workload.HTTP {
		endpoint = col.endpoints["receivers.otlp.protocols.http.endpoint"]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var truthFile bytes.Buffer
	sent, err := workload.Run(ctx, cfg, workload.Target{Endpoint: endpoint, Protocol: protocol, Insecure: true}, &truthFile)
	if err != nil {
		t.Fatalf("workload: %v\ncollector log:\n%s", err, col.log())
	}
	truths := readTruth(t, truthFile.Bytes())
	if len(truths) != sent.Requests {
		t.Fatalf("the ground truth has %d requests, the workload sent %d", len(truths), sent.Requests)
	}
	return sent, truths
}

// startSink starts an in-process OTLP receiver that keeps what it gets, for
// the collector under test to export to.
func startSink(t *testing.T) *otlpsink.Sink {
	t.Helper()
	sink, err := otlpsink.Start(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)
	return sink
}
