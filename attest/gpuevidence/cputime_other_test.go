//go:build !unix

package gpuevidence_test

import "time"

// cpuTime is not measured here: the benchmark reports 0 CPU seconds.
func cpuTime() time.Duration { return 0 }
