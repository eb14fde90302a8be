package kmsg

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"
)

const (
	containerID = "3f4b1e9a5c2d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f"
	podUID      = "6b1f2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
)

// fakeProc writes a /proc with an uptime and one containerized process.
func fakeProc(t *testing.T, pid string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "uptime"), []byte("10000.00 39000.00\n"), 0o600))
	p := filepath.Join(dir, pid)
	require.NoError(t, os.MkdirAll(p, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(p, "status"), []byte("Name:\tpython3\nTgid:\t48211\nNSpid:\t48211\t7\n"), 0o600))
	cgroup := "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b1f2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d.slice/cri-containerd-" + containerID + ".scope\n"
	require.NoError(t, os.WriteFile(filepath.Join(p, "cgroup"), []byte(cgroup), 0o600))
	return dir
}

type collected struct {
	mu      sync.Mutex
	records []plog.LogRecord
	seen    chan struct{}
}

func (c *collected) emit(ld plog.Logs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		if v, _ := rls.At(i).Resource().Attributes().Get("host.name"); v.Str() != "gpu-node-1" {
			panic("resource without host.name")
		}
		lrs := rls.At(i).ScopeLogs().At(0).LogRecords()
		for j := 0; j < lrs.Len(); j++ {
			c.records = append(c.records, lrs.At(j))
		}
	}
	c.seen <- struct{}{}
}

func (c *collected) all() []plog.LogRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]plog.LogRecord(nil), c.records...)
}

var now = time.Date(2026, 5, 9, 12, 0, 0, 0, time.UTC)

func TestWatchFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "kmsg")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	c := &collected{seen: make(chan struct{}, 16)}
	var counts Counts
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, Options{Path: fifo, ProcPath: fakeProc(t, "48211"), HostName: "gpu-node-1", PollInterval: 10 * time.Millisecond, Now: func() time.Time { return now }}, c.emit, &counts)
	}()

	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	require.NoError(t, err)
	xid := "3,1843,5678901234,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus.\n"
	_, err = w.WriteString("6,1840,5678900000,-;NVRM: GPU at PCI:0000:3b:00: GPU-5b8e…\n" + xid + " SUBSYSTEM=pci\n" + xid[:40])
	require.NoError(t, err)
	<-c.seen
	// the rest of a line split across writes, then a repeat and one without a live process
	_, err = w.WriteString(xid[40:] + "4,1850,5679000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=999999, name=python3, GPU has fallen off the bus.\n")
	require.NoError(t, err)
	<-c.seen
	require.NoError(t, w.Close())

	recs := c.all()
	require.Len(t, recs, 3, "every XID its own record, repeats included")
	first := recs[0]
	assert.Equal(t, "gpu.xid", first.EventName())
	assert.Equal(t, plog.SeverityNumberError, first.SeverityNumber())
	attrs := first.Attributes().AsRaw()
	assert.Equal(t, map[string]any{
		"nvidia.xid": int64(79), "nvidia.xid.description": "GPU has fallen off the bus", "nvidia.xid.source": "kmsg",
		"nvidia.xid.message": "GPU has fallen off the bus.", "nvidia.pci.bus_id": "0000:3b:00",
		"process.pid": int64(48211), "process.command": "python3", "process.vpid": int64(7),
		"container.id": containerID, "k8s.pod.uid": podUID,
	}, attrs)
	boot := now.Add(-10000 * time.Second)
	assert.Equal(t, boot.Add(5678901234*time.Microsecond), first.Timestamp().AsTime())
	assert.Equal(t, "XID 79 on PCI 0000:3b:00 (pid 48211 python3): GPU has fallen off the bus.", first.Body().Str())
	assert.Equal(t, attrs, recs[1].Attributes().AsRaw())
	gone := recs[2].Attributes().AsRaw()
	assert.Equal(t, int64(999999), gone["process.pid"])
	assert.NotContains(t, gone, "container.id", "a process that is gone has no container")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}

func TestWatchFileFromStartAndFromEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmesg.log")
	old := "[ 6513.413000] NVRM: Xid (PCI:0000:00:1e): 119, pid=2771, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU0 GSP!\n"
	require.NoError(t, os.WriteFile(path, []byte(old), 0o600))
	for _, fromStart := range []bool{true, false} {
		c := &collected{seen: make(chan struct{}, 16)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Watch(ctx, Options{Path: path, ProcPath: t.TempDir(), FromStart: fromStart, HostName: "gpu-node-1", PollInterval: 5 * time.Millisecond, Now: func() time.Time { return now }}, c.emit, &Counts{})
		}()
		if fromStart {
			<-c.seen
			require.Len(t, c.all(), 1)
			assert.Equal(t, int64(119), c.all()[0].Attributes().AsRaw()["nvidia.xid"])
			assert.Equal(t, now, c.all()[0].Timestamp().AsTime(), "no /proc/uptime: the time it was read")
		} else {
			// Watch opens the file at some point: append until a line comes through.
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			for appended := false; !appended; {
				_, err = f.WriteString("[ 6600.000000] NVRM: Xid (PCI:0000:00:1e): 120, pid=2771, name=vllm, GSP task exception\n")
				require.NoError(t, err)
				select {
				case <-c.seen:
					appended = true
				case <-time.After(20 * time.Millisecond):
				}
			}
			require.NoError(t, f.Close())
			for _, r := range c.all() {
				assert.Equal(t, int64(120), r.Attributes().AsRaw()["nvidia.xid"], "only what was written after it opened the file")
			}
		}
		cancel()
		require.NoError(t, <-done)
	}
}

func TestWatchNamesTheMissingPrivilege(t *testing.T) {
	err := Watch(context.Background(), Options{Path: filepath.Join(t.TempDir(), "absent")}, func(plog.Logs) {}, &Counts{})
	require.ErrorContains(t, err, "opening the kernel log")
}
