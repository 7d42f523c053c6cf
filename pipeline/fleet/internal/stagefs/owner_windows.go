package stagefs

import (
	"fmt"
	"io/fs"
	"runtime"
)

// OwnerOf is -1 on Windows: files have no POSIX owner.
func OwnerOf(fs.FileInfo) int { return -1 }

// ownersKnown refuses: the shared-directory check trusts a path only
// when no one but its user (and root) can replace it, judged from POSIX
// owners and modes, which Windows files do not have. Refusing keeps the
// guarantee; a weaker check would not.
func ownersKnown() error {
	return fmt.Errorf("%w: a dispatch directory is trusted only after checking POSIX owners and modes, which %s/%s does not have\nhint: stage and run fleet dispatches from Linux or macOS; fleet verify works here", ErrUnsafePath, runtime.GOOS, runtime.GOARCH)
}
