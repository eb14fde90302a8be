/* Kernel types the tracer reads, reduced to the fields it uses. CO-RE
 * (preserve_access_index) relocates every access against the running
 * kernel's BTF, so these need not match any one kernel's layout. */
#pragma once

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed int __s32;
typedef signed long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u16 umode_t;
typedef __u32 dev_t;

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

#define BPF_F_NO_PREALLOC (1U << 0)
#define BPF_RB_NO_WAKEUP (1ULL << 0)
#define BPF_RB_FORCE_WAKEUP (1ULL << 1)
#define BPF_RB_AVAIL_DATA 0
#define BPF_RB_RING_SIZE 1
#define BPF_LOCAL_STORAGE_GET_F_CREATE (1ULL << 0)

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
};

struct inode {
	umode_t i_mode;
	dev_t i_rdev;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

/* Only its file pointer: see fd_device. */
struct kiocb {
	struct file *ki_filp;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct upid {
	int nr;
	void *ns;
} __attribute__((preserve_access_index));

/* numbers is a flexible array: one per level, at most three read directly. */
struct pid {
	unsigned int level;
	struct upid numbers[3];
} __attribute__((preserve_access_index));

/* kernfs_node's parent was renamed __parent in 6.15: both spellings, for
 * bpf_core_field_exists to pick. */
struct kernfs_node {
	__u64 id;
	const char *name;
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));

struct kernfs_node___615 {
	const char *name;
	struct kernfs_node *__parent;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct css_set {
	struct cgroup *dfl_cgrp;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct files_struct *files;
	struct task_struct *group_leader;
	struct pid *thread_pid;
	struct css_set *cgroups;
	char comm[16];
} __attribute__((preserve_access_index));

struct pt_regs {
	unsigned long orig_ax;
	unsigned long di;
	unsigned long si;
	unsigned long dx;
} __attribute__((preserve_access_index));

struct trace_event_raw_sys_enter {
	long id;
	unsigned long args[6];
} __attribute__((preserve_access_index));

struct trace_event_raw_sys_exit {
	long id;
	long ret;
} __attribute__((preserve_access_index));
