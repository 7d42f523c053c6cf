// Package benchbin builds the gpuattest command that the benchmarks of
// bench/ time as a whole process.
package benchbin

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// Gpuattest builds ./cmd/gpuattest into dir/gpuattest and returns its
// path. It is run from the repository root, as every bench command is.
func Gpuattest(dir string) (string, error) {
	bin := filepath.Join(dir, "gpuattest")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/gpuattest").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building gpuattest (run from the repository root): %v\n%s", err, out)
	}
	return bin, nil
}
