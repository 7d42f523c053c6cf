// Command gpuattest builds CUDA kernels for pinned targets, validates them on
// the GPU and emits signed attestations that third parties verify offline.
package main

//go:generate go test . -run ^TestCLIDocs$ -update

import (
	"os"

	"github.com/gpuattest/gpuattest/internal/initgc"
	"github.com/gpuattest/gpuattest/internal/limits"
)

func main() {
	initgc.Restore()
	limits.SetSoftMemoryLimit()
	os.Exit(execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
