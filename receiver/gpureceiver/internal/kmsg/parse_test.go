package kmsg

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		line string
		want XID
	}{
		{
			line: "3,1843,5678901234,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus.",
			want: XID{Code: 79, PCI: "0000:3b:00", PID: 48211, Process: "python3", Message: "GPU has fallen off the bus.", SinceBoot: 5678901234 * time.Microsecond, HasTimestamp: true},
		},
		{
			line: "[ 6513.413000] NVRM: Xid (PCI:0000:00:1e): 119, pid=2771, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
			want: XID{Code: 119, PCI: "0000:00:1e", PID: 2771, Process: "nvidia-smi", Message: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).", SinceBoot: 6513413 * time.Millisecond, HasTimestamp: true},
		},
		{
			line: "NVRM: Xid (PCI:0000:b3:00): 31, pid='<unknown>', name=<unknown>, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2c_1e000000.",
			want: XID{Code: 31, PCI: "0000:b3:00", Message: "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2c_1e000000."},
		},
		{
			// Older drivers print no pid.
			line: "[  412.010101] NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
			want: XID{Code: 13, PCI: "0000:01:00", Message: "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address", SinceBoot: 412010101 * time.Microsecond, HasTimestamp: true},
		},
		{
			line: "4,2001,7000000000,-;NVRM: Xid (0000:41:00): 120, pid=991, name=vllm, GSP task exception: (ucode halted)",
			want: XID{Code: 120, PCI: "0000:41:00", PID: 991, Process: "vllm", Message: "GSP task exception: (ucode halted)", SinceBoot: 7000 * time.Second, HasTimestamp: true},
		},
	} {
		got, ok := Parse([]byte(tt.line))
		if !ok || got != tt.want {
			t.Errorf("Parse(%q)\n = %+v, %v\nwant %+v", tt.line, got, ok, tt.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, line := range []string{
		"",
		" SUBSYSTEM=pci", // a /dev/kmsg continuation line
		" DEVICE=+pci:0000:3b:00.0",
		"6,1,2,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
		"NVRM: Xid (PCI:0000:3b:00): seventy-nine, pid=1",
		"NVRM: Xid (PCI:0000:3b:00): 99999999, pid=1",     // beyond any XID
		"NVRM: Xid (PCI:zz;rm -rf): 79, pid=1, name=x, y", // not a PCI address
		"NVRM: Xid (PCI:0000:3b:00) 79",
	} {
		if x, ok := Parse([]byte(line)); ok {
			t.Errorf("Parse(%q) = %+v, want not an XID", line, x)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"3,1843,5678901234,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python3, GPU has fallen off the bus.",
		"[ 6513.413000] NVRM: Xid (PCI:0000:00:1e): 119, pid=2771, name=nvidia-smi, Timeout",
		"NVRM: Xid (PCI:0000:b3:00): 31, pid='<unknown>', name=<unknown>, Ch 00000008",
		"[1e400] NVRM: Xid (PCI:0): 1, pid=-1, name=",
		"9,9,-9,-;NVRM: Xid (PCI:): ",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		x, ok := Parse(line)
		if !ok {
			return
		}
		if x.PCI == "" || !isPCI(x.PCI) || x.Code > 65535 || x.SinceBoot < 0 {
			t.Fatalf("Parse(%q) = %+v: accepted an impossible XID", line, x)
		}
	})
}
