// SPDX-License-Identifier: GPL-2.0
/* Traces ioctl(2) on selected character devices (the NVIDIA driver's by
 * default): per call it decodes the escape, reads the driver's status from
 * the parameters at exit and measures the latency. Calls are counted in
 * place (by process, escape and outcome, with a log2 latency histogram) so
 * the common path never wakes user space; failed and slow calls also go to
 * a ring buffer, one event each.
 *
 * Every call of the host runs the entry program, so the device filter comes
 * first and costs no map lookup helper (array lookups are inlined); a call
 * on a traced device is counted in its CPU's cache slot, without a hash
 * lookup, unless its slot counts another key. Kernel memory is read with
 * direct (BTF) loads where the verifier allows them: a probe read costs
 * ~30 ns a call on the CI machine, a direct load ~1 ns. */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define S_IFMT 00170000
#define S_IFCHR 0020000
#define ANY_MINOR 0xfffff
#define MINOR_BITS 20

#define KIND_RM 1
#define KIND_UVM 2

#define NV_ESC_IOCTL_XFER_CMD 211
#define HIST_BUCKETS 40

/* status values that are not NV_STATUS codes */
#define STATUS_NONE 0xffffffff /* no status offset known for this call */
/* NV_ERR_* codes are below 0x10000, NV_WARN_* just above it: a larger
 * value at a status offset means the layout is wrong for this driver
 * (a length or a handle), and the call's status is unknown. */
#define STATUS_MAX 0x1ffff

/* Set from user space before loading. */
volatile const __u64 slow_ns = 100000000;
/* A quarter of the ring, in events: see wakeup_flags. */
volatile const __u32 wakeup_events = 1;
/* stat_cache's size - 1 (its size is a power of two). */
volatile const __u32 stat_cache_mask = 127;
/* Whether the kernel has the bpf_rdonly_cast kfunc (6.2), which lets the
 * program read a struct file by direct loads; before it, probe reads. */
volatile const __u8 direct_file_reads = 0;

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

struct call {
	__u64 start_ns; /* 0: no call in flight */
	__u64 params; /* user address of the (XFER-unwrapped) parameters */
	__u32 dev;
	__u32 cmd; /* raw ioctl command */
	__u32 nr;  /* escape: _IOC_NR for rm, the command for uvm */
	__u32 size; /* parameter size (rm; XFER's inner size) */
	__u8 kind;
	__u8 xfer;
	__u64 named_cgroup; /* the cgroup whose names this thread's events sent last, */
	__u64 named_epoch;  /* in this names epoch */
};

struct stat_key {
	__u32 tgid;
	__u32 nr;
	__u32 status;
	__s32 err;
	__u8 kind;
	__u8 pad[3];
	char comm[16]; /* the process's (thread group leader's) comm */
};

struct stat_value {
	__u64 calls;
	__u64 sum_ns;
	__u64 buckets[HIST_BUCKETS]; /* bucket i: [2^i, 2^(i+1)) ns */
};

struct event {
	__u64 start_ns;
	__u64 latency_ns;
	__u64 cgroup_id;
	__u32 tgid;
	__u32 tid;
	__u32 dev;
	__u32 cmd;
	__u32 nr;
	__u32 size;
	__u32 status;
	__s32 err;
	__u8 kind;
	__u8 xfer;
	__u8 named; /* 0: cgroup and cgroup_parent are not set (see names_wanted) */
	__u8 pad[5];
	__u32 ns_tgid; /* the pids as the process sees them (its pid namespace) */
	__u32 ns_tid;
	char comm[16];	      /* thread */
	char process_comm[16]; /* thread group leader */
	char cgroup[128];      /* the cgroup v2 leaf's name, e.g. cri-containerd-<id>.scope */
	char cgroup_parent[128];
};

/* Force the generated Go types. */
const struct event *unused_event __attribute__((unused));

/* By major: 0 not traced, KIND_RM or KIND_UVM every minor of it,
 * KIND_BY_MINOR some of its minors, those in minors. */
#define MAJORS 4096
#define KIND_BY_MINOR 3
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAJORS);
	__type(key, __u32);
	__type(value, __u8);
} majors SEC(".maps");

/* dev_t → kind of the single devices traced (a path in the config); a
 * major that also has every minor traced is there as major:ANY_MINOR. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} minors SEC(".maps");

/* Where the status sits in a call's parameters, by escape slot (see
 * layout_slot): up to LAYOUT_SIZES parameter sizes, each with its offset;
 * size 0 matches uvm calls, which have no size in the command. */
#define LAYOUT_SLOTS 512
#define LAYOUT_SIZES 4
struct layout {
	__u32 size[LAYOUT_SIZES];
	__u32 offset[LAYOUT_SIZES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LAYOUT_SLOTS);
	__type(key, __u32);
	__type(value, struct layout);
} status_layouts SEC(".maps");

/* The call in flight on each thread, kept in the task itself: no shared
 * hash table, no lock. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct call);
} inflight SEC(".maps");

/* The call counters. A call's counter is in this CPU's slot of
 * stat_cache when the slot holds its key (no hash, no atomics: the common
 * path, a few keys per process), else in the shared stats hash (atomic
 * adds). The cache is small, so that it costs little memory on hosts with
 * hundreds of CPUs: a per-CPU hash of every key cost its size once per
 * CPU (16384 keys x 336 bytes x 224 CPUs = 1.2 GB). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stat_key);
	__type(value, struct stat_value);
} stats SEC(".maps");

/* A CPU's cache slot: the key it counts, and the read epoch of its last
 * update. User space bumps read_epoch before every read of the counters:
 * a slot last updated in epoch E has been read whole once the epoch is
 * E + 2, and may then count another key (user space keeps the totals). */
struct cached_stat {
	struct stat_key key;
	__u32 pad;
	__u64 epoch;
	struct stat_value value;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 128); /* a power of two; set from user space */
	__type(key, __u32);
	__type(value, struct cached_stat);
} stat_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} read_epoch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); /* resized from user space */
} events SEC(".maps");

/* The events written to the ring since it was created (see wakeup_flags). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} emitted SEC(".maps");

/* Set by user space when it forgets the cgroup names it was sent (see
 * names_wanted). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} names_epoch SEC(".maps");

/* 0: events dropped (ring full), 1: calls not traced (no task storage) */
#define COUNTER_DROPPED 0
#define COUNTER_UNTRACKED 1
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* A new stats entry's value: struct stat_value is too big for the stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stat_value);
} zero_stat SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &which);
	if (v)
		*v += 1;
}

/* User space polls the ring on a timer; waking it per event would cost
 * more than the rest of the tracing together. Every wakeup_events-th event
 * (a quarter of the ring) wakes it early: woken, it reads until the ring is
 * empty. The count is shared by all CPUs, so that exactly one event crosses
 * each mark: asking the ring how full it is took two helper calls, and two
 * CPUs crossing a quarter together could both miss it. */
static __always_inline __u64 wakeup_flags(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&emitted, &zero);
	if (!n)
		return BPF_RB_NO_WAKEUP;
	return (__sync_fetch_and_add(n, 1) + 1) % wakeup_events == 0 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* The pid number in the innermost pid namespace of pid. The verifier
 * allows direct loads at constant offsets only: the usual depths (the
 * host, a container, a container in one) are read so, deeper ones by a
 * probe read. */
static __always_inline __u32 ns_pid(struct pid *pid)
{
	switch (pid->level) {
	case 0:
		return pid->numbers[0].nr;
	case 1:
		return pid->numbers[1].nr;
	case 2:
		return pid->numbers[2].nr;
	}
	int nr = 0;
	bpf_core_read(&nr, sizeof(nr), &pid->numbers[pid->level].nr);
	return nr;
}

/* Names of the task's cgroup v2 leaf and its parent, where container
 * runtimes put the container and pod ids. */
static __always_inline void cgroup_names(struct task_struct *task, struct event *e)
{
	struct kernfs_node *kn = task->cgroups->dfl_cgrp->kn;
	struct kernfs_node *parent;
	if (bpf_core_field_exists(((struct kernfs_node___615 *)0)->__parent))
		parent = ((struct kernfs_node___615 *)kn)->__parent;
	else
		parent = kn->parent;
	bpf_probe_read_kernel_str(e->cgroup, sizeof(e->cgroup), kn->name);
	if (parent)
		bpf_probe_read_kernel_str(e->cgroup_parent, sizeof(e->cgroup_parent), parent->name);
	else
		e->cgroup_parent[0] = 0;
}

/* Whether the thread's event must carry its cgroup's names, which cost two
 * helper calls (~30 ns an event on the CI machine): user space keeps them
 * by cgroup id, so a thread sends them again only when it has moved to
 * another cgroup or user space has started a new names epoch, forgetting
 * the names of an older one. Call it for an event that will be sent. */
static __always_inline int names_wanted(struct call *c, __u64 cgroup_id)
{
	__u32 zero = 0;
	__u64 *epoch = bpf_map_lookup_elem(&names_epoch, &zero);
	if (!epoch)
		return 1;
	if (c->named_cgroup == cgroup_id && c->named_epoch == *epoch)
		return 0;
	c->named_cgroup = cgroup_id;
	c->named_epoch = *epoch;
	return 1;
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;
	shift = (v > 0xffffffffULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xffff) << 4; v >>= shift; r |= shift;
	shift = (v > 0xff) << 3; v >>= shift; r |= shift;
	shift = (v > 0xf) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

/* The device behind fd in the current process, or 0 when it is not a
 * character device. The fd table's slots hold plain addresses to the
 * verifier; with bpf_rdonly_cast the slot is read as the file pointer of a
 * struct that holds one (kiocb's ki_filp), a direct load, else by a
 * probe read (~30 ns). */
static __always_inline __u32 fd_device(struct task_struct *task, unsigned int fd)
{
	struct fdtable *fdt = task->files->fdt;
	if (fd >= fdt->max_fds)
		return 0;
	umode_t mode;
	dev_t rdev;
	if (direct_file_reads) {
		__u64 slot = (__u64)fdt->fd + fd * sizeof(struct file *);
		struct kiocb *holder = bpf_rdonly_cast((void *)(slot - bpf_core_field_offset(struct kiocb, ki_filp)),
						       bpf_core_type_id_kernel(struct kiocb));
		struct file *f = holder->ki_filp;
		if (!f)
			return 0;
		struct inode *inode = f->f_inode;
		mode = inode->i_mode;
		rdev = inode->i_rdev;
	} else {
		struct file *f = 0;
		if (bpf_probe_read_kernel(&f, sizeof(f), &fdt->fd[fd]) || !f)
			return 0;
		struct inode *inode = BPF_CORE_READ(f, f_inode);
		mode = BPF_CORE_READ(inode, i_mode);
		rdev = BPF_CORE_READ(inode, i_rdev);
	}
	return (mode & S_IFMT) == S_IFCHR ? rdev : 0;
}

/* How dev's calls are decoded, or 0 when it is not traced. */
static __always_inline __u8 device_kind(__u32 dev)
{
	__u32 major = dev >> MINOR_BITS;
	__u8 *kind = bpf_map_lookup_elem(&majors, &major);
	if (!kind || *kind != KIND_BY_MINOR)
		return kind ? *kind : 0;
	kind = bpf_map_lookup_elem(&minors, &dev);
	if (!kind) {
		__u32 any = dev | ANY_MINOR;
		kind = bpf_map_lookup_elem(&minors, &any);
	}
	return kind ? *kind : 0;
}

/* The status_layouts slot of a call: rm escapes (_IOC_NR, 8 bits) at
 * 0-255; uvm commands below 0xf0 at 256 + command; UVM_INITIALIZE and
 * UVM_DEINITIALIZE (0x3000000N) at 496 + N. Other calls have none. Keep in
 * step with layoutSlot in tracer.go. */
static __always_inline __s32 layout_slot(__u8 kind, __u32 nr)
{
	if (kind == KIND_RM)
		return nr < 256 ? nr : -1;
	if (nr < 0xf0)
		return 256 + nr;
	if ((nr & ~0xfU) == 0x30000000)
		return 496 + (nr & 0xf);
	return -1;
}

/* The byte offset of the call's status in its parameters, or -1. */
static __always_inline __s64 status_offset(__u8 kind, __u32 nr, __u32 size)
{
	__s32 slot = layout_slot(kind, nr);
	if (slot < 0)
		return -1;
	__u32 key = slot;
	struct layout *l = bpf_map_lookup_elem(&status_layouts, &key);
	if (!l)
		return -1;
	for (int i = 0; i < LAYOUT_SIZES; i++) {
		if (l->offset[i] && l->size[i] == size)
			return l->offset[i];
	}
	return -1;
}

/* Which of this CPU's cache slots counts key. */
static __always_inline __u32 cache_slot(const struct stat_key *k)
{
	__u32 h = k->tgid * 0x9e3779b1 ^ k->nr * 0x85ebca77 ^ k->status * 0xc2b2ae3d ^ (__u32)k->err ^ (__u32)k->kind << 28;
	h ^= h >> 15;
	return h & stat_cache_mask;
}

static __always_inline int same_key(const struct stat_key *a, const struct stat_key *b)
{
	const __u32 *x = (const __u32 *)a, *y = (const __u32 *)b;
	_Static_assert(sizeof(struct stat_key) == 36, "compared as nine words");
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4] &&
	       x[5] == y[5] && x[6] == y[6] && x[7] == y[7] && x[8] == y[8];
}

/* Counts one call of key that took latency ns. */
static __always_inline void count_call(const struct stat_key *key, __u64 latency)
{
	__u32 b = log2_u64(latency | 1);
	if (b >= HIST_BUCKETS)
		b = HIST_BUCKETS - 1;
	__u32 zero = 0;
	__u64 *epoch = bpf_map_lookup_elem(&read_epoch, &zero);
	__u32 slot = cache_slot(key);
	struct cached_stat *c = bpf_map_lookup_elem(&stat_cache, &slot);
	if (epoch && c) {
		int mine = same_key(&c->key, key);
		if (!mine && (c->value.calls == 0 || c->epoch + 2 <= *epoch)) {
			/* Free, or its counts have been read: count key here from
			 * zero. The counts are zeroed before the key changes, so a
			 * reader never sees the new key with the old counts. */
			__builtin_memset(&c->value, 0, sizeof(c->value));
			__builtin_memcpy(&c->key, key, sizeof(c->key));
			mine = 1;
		}
		if (mine) {
			c->epoch = *epoch;
			c->value.calls += 1;
			c->value.sum_ns += latency;
			c->value.buckets[b] += 1;
			return;
		}
	}
	struct stat_value *v = bpf_map_lookup_elem(&stats, key);
	if (!v) {
		struct stat_value *init = bpf_map_lookup_elem(&zero_stat, &zero);
		if (!init)
			return;
		bpf_map_update_elem(&stats, key, init, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&stats, key);
		if (!v)
			return;
	}
	__sync_fetch_and_add(&v->calls, 1);
	__sync_fetch_and_add(&v->sum_ns, latency);
	__sync_fetch_and_add(&v->buckets[b], 1);
}

static __always_inline void on_enter(unsigned int fd, __u32 cmd, __u64 arg)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 dev = fd_device(task, fd);
	if (!dev)
		return;
	__u8 kind = device_kind(dev);
	if (!kind)
		return;
	struct call *c = bpf_task_storage_get(&inflight, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c) {
		count(COUNTER_UNTRACKED);
		return;
	}
	c->dev = dev;
	c->cmd = cmd;
	c->params = arg;
	c->kind = kind;
	c->xfer = 0;
	c->size = 0;
	if (kind == KIND_RM) {
		c->nr = cmd & 0xff;
		c->size = (cmd >> 16) & 0x3fff;
		if (c->nr == NV_ESC_IOCTL_XFER_CMD && c->size == 16) {
			struct { __u32 cmd; __u32 size; __u64 ptr; } xfer;
			if (!bpf_probe_read_user(&xfer, sizeof(xfer), (void *)arg)) {
				c->nr = xfer.cmd;
				c->size = xfer.size;
				c->params = xfer.ptr;
				c->xfer = 1;
			}
		}
	} else {
		c->nr = cmd;
	}
	c->start_ns = bpf_ktime_get_ns();
}

static __always_inline void on_exit(long ret)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct call *c = bpf_task_storage_get(&inflight, task, 0, 0);
	if (!c || !c->start_ns)
		return;
	__u64 latency = bpf_ktime_get_ns() - c->start_ns;
	struct stat_key key = {
		.tgid = task->tgid,
		.nr = c->nr,
		.status = STATUS_NONE,
		.kind = c->kind,
	};
	if (ret < 0)
		key.err = ret;
	/* Read even when the syscall failed: the driver then leaves the
	 * caller's value, which user space reports beside the errno. */
	__s64 off = status_offset(c->kind, c->nr, c->kind == KIND_RM ? c->size : 0);
	__u32 status;
	if (off >= 0 && !bpf_probe_read_user(&status, sizeof(status), (void *)(c->params + off)) && status <= STATUS_MAX)
		key.status = status;
	__builtin_memcpy(key.comm, task->group_leader->comm, sizeof(key.comm));

	count_call(&key, latency);

	int failed = ret < 0 || (key.status != 0 && key.status != STATUS_NONE);
	if (failed || latency >= slow_ns) {
		struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			count(COUNTER_DROPPED);
		} else {
			e->start_ns = c->start_ns;
			e->latency_ns = latency;
			e->cgroup_id = task->cgroups->dfl_cgrp->kn->id; /* bpf_get_current_cgroup_id's, without the call */
			int named = names_wanted(c, e->cgroup_id);
			e->named = named;
			e->tgid = key.tgid;
			e->tid = task->pid;
			e->dev = c->dev;
			e->cmd = c->cmd;
			e->nr = c->nr;
			e->size = c->size;
			e->status = key.status;
			e->err = key.err;
			e->kind = c->kind;
			e->xfer = c->xfer;
			__builtin_memset(e->pad, 0, sizeof(e->pad));
			e->ns_tid = ns_pid(task->thread_pid);
			e->ns_tgid = ns_pid(task->group_leader->thread_pid);
			if (named)
				cgroup_names(task, e);
			__builtin_memcpy(e->comm, task->comm, sizeof(e->comm));
			__builtin_memcpy(e->process_comm, key.comm, sizeof(e->process_comm));
			bpf_ringbuf_submit(e, wakeup_flags());
		}
	}
	c->start_ns = 0;
}

/* fentry/fexit on the syscall: the cheap path, touching ioctl only. */
SEC("fentry/__x64_sys_ioctl")
int BPF_PROG(fentry_ioctl, struct pt_regs *regs)
{
	on_enter(BPF_CORE_READ(regs, di), BPF_CORE_READ(regs, si), BPF_CORE_READ(regs, dx));
	return 0;
}

SEC("fexit/__x64_sys_ioctl")
int BPF_PROG(fexit_ioctl, struct pt_regs *regs, long ret)
{
	on_exit(ret);
	return 0;
}

/* BTF raw tracepoints on every syscall, filtered to ioctl here: the last
 * resort, where tracefs is missing. A traced call costs less than with the
 * syscall tracepoints (no copy of the arguments into a perf buffer), but
 * every other syscall of the host runs the program too. */
#define NR_ioctl 16 /* x86_64 */

SEC("tp_btf/sys_enter")
int BPF_PROG(raw_enter, struct pt_regs *regs, long id)
{
	if (id != NR_ioctl)
		return 0;
	on_enter(regs->di, regs->si, regs->dx);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(raw_exit, struct pt_regs *regs, long ret)
{
	if (regs->orig_ax != NR_ioctl)
		return 0;
	on_exit(ret);
	return 0;
}

/* Syscall tracepoints: where BPF trampolines are missing. */
SEC("tracepoint/syscalls/sys_enter_ioctl")
int tp_enter_ioctl(struct trace_event_raw_sys_enter *ctx)
{
	on_enter(ctx->args[0], ctx->args[1], ctx->args[2]);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_ioctl")
int tp_exit_ioctl(struct trace_event_raw_sys_exit *ctx)
{
	on_exit(ctx->ret);
	return 0;
}
