package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// collector is one running otelcol-loom process.
type collector struct {
	cmd       *exec.Cmd
	dir       string // working directory: the default config's ./data lands here
	logPath   string
	listeners listeners
	otlp      string // OTLP/gRPC endpoint
	telemetry string // the collector's own metrics, Prometheus text
	pprof     string
	exited    chan struct{}
	waitErr   error
}

// errPortTaken: a port picked free was bound by another process before
// the collector could bind it.
var errPortTaken = errors.New("a listener's port was taken")

// startAttempts bounds the starts on other ports after errPortTaken.
const startAttempts = 3

// startCollector writes cfg into a fresh temporary directory, runs bin
// there and waits until health_check reports ready. Its listeners get free
// ports; when another process (a test beside this one) takes one before
// the collector binds it, it starts again on others.
func startCollector(bin string, cfg map[string]any) (*collector, error) {
	for attempt := 1; ; attempt++ {
		c, err := startCollectorOnce(bin, cfg)
		if !errors.Is(err, errPortTaken) || attempt == startAttempts {
			return c, err
		}
	}
}

func startCollectorOnce(bin string, cfg map[string]any) (c *collector, err error) {
	moved, err := moveListeners(cfg)
	if err != nil {
		return nil, err
	}
	c = &collector{listeners: moved, exited: make(chan struct{})}
	health, err := moved.endpoint("extensions.health_check.endpoint")
	if err != nil {
		return nil, err
	}
	if c.otlp, err = moved.endpoint("receivers.otlp.protocols.grpc.endpoint"); err != nil {
		return nil, err
	}
	if c.telemetry, err = moved.endpoint("prometheus.port"); err != nil {
		return nil, err
	}
	if c.pprof, err = moved.endpoint("extensions.pprof.endpoint"); err != nil {
		return nil, err
	}
	if c.dir, err = os.MkdirTemp("", "loomperf-"); err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			_ = os.RemoveAll(c.dir)
		}
	}()
	rendered, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(c.dir, "config.yaml")
	if err := os.WriteFile(configPath, rendered, 0o600); err != nil {
		return nil, err
	}
	c.logPath = filepath.Join(c.dir, "collector.log")
	logFile, err := os.Create(c.logPath)
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(bin, "--config", configPath)
	c.cmd.Dir = c.dir
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := c.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	started = true // from here on stop removes the directory
	go func() {
		c.waitErr = c.cmd.Wait()
		_ = logFile.Close()
		close(c.exited)
	}()
	if err := c.waitReady(health, time.Minute); err != nil {
		return nil, errors.Join(err, c.stop())
	}
	return c, nil
}

func (c *collector) waitReady(health string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			log := c.logTail()
			if strings.Contains(log, "address already in use") {
				return fmt.Errorf("the collector exited during start-up (%w, %w); its log:\n%s", c.waitErr, errPortTaken, log)
			}
			return fmt.Errorf("the collector exited during start-up (%w); its log:\n%s", c.waitErr, log)
		default:
		}
		if resp, err := client.Get("http://" + health + "/"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the collector was not ready after %s; its log:\n%s", timeout, c.logTail())
}

// stop ends the collector (SIGTERM, then SIGKILL after 30 s) and removes
// its directory; it returns how it exited.
func (c *collector) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-c.exited:
		err = c.waitErr
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		err = errors.New("it did not stop within 30 s of SIGTERM")
	}
	if err != nil {
		err = fmt.Errorf("collector: %w; its log:\n%s", err, c.logTail())
	}
	_ = os.RemoveAll(c.dir)
	return err
}

// logTail is the end of the collector's log, for errors.
func (c *collector) logTail() string {
	b, _ := os.ReadFile(c.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuTime is the user and system CPU time the process has used.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPUTime(string(b))
}

// parseCPUTime reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line; the command (field 2) may hold spaces and parens.
func parseCPUTime(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/PID/stat: no command in %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state): utime is field 14.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/PID/stat: %d fields after the command", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/PID/stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// memory is the process's resident set: now and at its peak.
// memory is a process's resident set, its peak, and its anonymous part: the
// resident set less the mapped files, of which the binary's own text is
// most (shared, and reclaimable under pressure).
type memory struct{ rss, peak, anon int64 } // bytes

func memoryOf(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	defer func() { _ = f.Close() }()
	return parseStatus(f)
}

// parseStatus reads VmRSS, VmHWM and RssAnon from /proc/PID/status.
func parseStatus(r io.Reader) (memory, error) {
	var m memory
	fields := map[string]*int64{"VmRSS": &m.rss, "VmHWM": &m.peak, "RssAnon": &m.anon}
	var found int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		dst, wanted := fields[key]
		if !ok || !wanted {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("/proc/PID/status %s: %w", key, err)
		}
		*dst = kb << 10
		found++
	}
	if err := sc.Err(); err != nil {
		return memory{}, err
	}
	if found != len(fields) {
		return memory{}, errors.New("/proc/PID/status lacks one of VmRSS, VmHWM and RssAnon")
	}
	return m, nil
}

// selfMetrics reads the collector's own metrics and sums the samples of
// every metric by name (labels dropped).
func (c *collector) selfMetrics(ctx context.Context) (map[string]float64, error) {
	body, err := httpGet(ctx, "http://"+c.telemetry+"/metrics")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parsePrometheusText(body)
}

// parsePrometheusText sums the samples of each metric in the text format.
func parsePrometheusText(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}

// sumPrefix adds the metrics whose names start with prefix.
func sumPrefix(metrics map[string]float64, prefix string) float64 {
	var sum float64
	for name, v := range metrics {
		if strings.HasPrefix(name, prefix) {
			sum += v
		}
	}
	return sum
}

func httpGet(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}
