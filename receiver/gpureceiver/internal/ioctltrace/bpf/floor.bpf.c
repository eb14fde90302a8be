// SPDX-License-Identifier: GPL-2.0
/* The floor of the tracer's cost, for its benchmarks only: empty programs
 * on the hooks the tracer uses. What a call pays under them is what the
 * hook itself costs; the tracer's own work is the rest. */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("fentry/__x64_sys_ioctl")
int BPF_PROG(floor_fentry, struct pt_regs *regs) { return 0; }

SEC("fexit/__x64_sys_ioctl")
int BPF_PROG(floor_fexit, struct pt_regs *regs, long ret) { return 0; }

SEC("tp_btf/sys_enter")
int BPF_PROG(floor_raw_enter, struct pt_regs *regs, long id) { return 0; }

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_raw_exit, struct pt_regs *regs, long ret) { return 0; }

SEC("tracepoint/syscalls/sys_enter_ioctl")
int floor_tp_enter(void *ctx) { return 0; }

SEC("tracepoint/syscalls/sys_exit_ioctl")
int floor_tp_exit(void *ctx) { return 0; }
