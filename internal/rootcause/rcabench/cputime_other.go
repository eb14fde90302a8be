//go:build !unix

package rcabench

import "time"

// cpuTime is not measured here: reports show 0.
func cpuTime() time.Duration { return 0 }
