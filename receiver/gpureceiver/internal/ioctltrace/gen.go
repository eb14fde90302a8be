package ioctltrace // import "github.com/loom-otel/loom/receiver/gpureceiver/internal/ioctltrace"

// The BPF objects and their Go bindings are committed; `make generate`
// rebuilds them with Debian's clang 14 and libbpf headers (it installs
// them), so that the output is the same on every machine. The floor's
// object, empty programs on the same hooks, serves the benchmarks only.
//go:generate ../../../../.tools/bpf2go -cc clang-14 -strip llvm-strip-14 -tags linux -target amd64 -type event -type stat_key -type stat_value -type layout -type cached_stat ioctl bpf/ioctl.bpf.c -- -I/usr/include -Wall -Werror
//go:generate ../../../../.tools/bpf2go -cc clang-14 -strip llvm-strip-14 -tags linux -target amd64 -output-suffix _test floor bpf/floor.bpf.c -- -I/usr/include -Wall -Werror
