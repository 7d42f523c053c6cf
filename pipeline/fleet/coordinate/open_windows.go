package coordinate

import (
	"fmt"
	"os"

	"github.com/gpuattest/gpuattest/internal/limits"
)

// openNoFollow opens path for reading without following a symbolic link
// at its last element. Windows has no O_NOFOLLOW: path must be a regular
// file by Lstat, and the file opened must be that same file, so a link
// or a swap between the two is refused rather than followed.
func openNoFollow(path string) (*os.File, error) {
	at, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !at.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, limits.ErrNotRegular)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !os.SameFile(at, fi) {
		err = fmt.Errorf("%s: replaced while it was opened: %w", path, limits.ErrNotRegular)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
