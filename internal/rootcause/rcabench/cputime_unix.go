//go:build unix

package rcabench

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user and system), which
// unlike the wall clock does not grow when other jobs share the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
