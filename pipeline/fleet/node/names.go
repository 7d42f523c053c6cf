package node

import "github.com/gpuattest/gpuattest/pipeline/fleet/internal/stagefs"

// ErrRegistry is wrapped by Sign's error when the registry could not
// be read or written: another attempt may pass.
var ErrRegistry = stagefs.ErrRegistry
