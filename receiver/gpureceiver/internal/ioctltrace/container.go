package ioctltrace // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"

import (
	"path"
	"regexp"
	"strings"
)

// Container runtimes name a container's cgroup after its id:
// cri-containerd-<id>.scope, docker-<id>.scope, crio-<id>.scope,
// libpod-<id>.scope (systemd driver) or <id> (cgroupfs driver); Kubernetes
// names the pod's cgroup kubepods-<qos>-pod<uid>.slice (uid with
// underscores) or pod<uid>.
var (
	containerIDPattern = regexp.MustCompile(`(?:^|[-_])([0-9a-f]{64})(?:\.scope)?$`)
	podUIDPattern      = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?$`)
)

// containerOf reads the container id and pod uid from the names of a
// process's cgroup and its parent; both are empty for a process that is not
// in a container.
func containerOf(cgroup, parent string) (containerID, podUID string) {
	if strings.Contains(cgroup, "conmon") {
		return "", "" // CRI-O's container monitor, not the container
	}
	if m := containerIDPattern.FindStringSubmatch(cgroup); m != nil {
		containerID = m[1]
	}
	if m := podUIDPattern.FindStringSubmatch(parent); m != nil && containerID != "" {
		podUID = strings.ReplaceAll(m[1], "_", "-")
	}
	return containerID, podUID
}

// ContainerOfCgroupPath reads the container id and pod uid from a
// process's cgroup v2 path, as /proc/<pid>/cgroup gives it after "0::".
func ContainerOfCgroupPath(p string) (containerID, podUID string) {
	dir, cgroup := path.Split(strings.TrimRight(p, "/"))
	_, parent := path.Split(strings.TrimRight(dir, "/"))
	return containerOf(cgroup, parent)
}

type container struct{ id, pod string }

// containerCache remembers the container of each cgroup id: a cgroup's
// names never change, and parsing them per event would cost more than
// tracing the call. The BPF program sends a cgroup's names once per thread
// and names epoch (names_wanted), so the cache keeps two generations, the
// current one and the last, and starts a new epoch when the current one is
// full. An event without names was sent before the epoch after its thread's
// last names began, so it was in the ring then, with fewer events ahead of
// it than the ring holds: too few to fill the next generation, which holds
// twice the ring. Its names are in one of the two.
type containerCache struct {
	current, last map[uint64]container
	generation    int          // cgroups in a generation
	newEpoch      func() error // makes the BPF program send names again
}

// maxCachedCgroups is the least size of a generation.
const maxCachedCgroups = 4096

func newContainerCache(ringEvents int, newEpoch func() error) *containerCache {
	return &containerCache{
		current: map[uint64]container{}, last: map[uint64]container{},
		generation: max(maxCachedCgroups, 2*ringEvents), newEpoch: newEpoch,
	}
}

// of returns the container of cgroupID, from its names when the event
// carries them (named).
func (c *containerCache) of(cgroupID uint64, named bool, cgroup, parent []int8) container {
	if known, ok := c.current[cgroupID]; ok || !named {
		if !ok {
			known = c.last[cgroupID]
		}
		return known
	}
	// Without a new epoch the BPF program would go on leaving out names
	// that are forgotten: the generation grows until one starts.
	if len(c.current) >= c.generation && c.newEpoch() == nil {
		c.last, c.current = c.current, map[uint64]container{}
	}
	id, pod := containerOf(cString(cgroup), cString(parent))
	c.current[cgroupID] = container{id, pod}
	return c.current[cgroupID]
}

// cString reads a NUL-terminated C string from the kernel.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
