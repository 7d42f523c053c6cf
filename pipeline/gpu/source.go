package gpu

import (
	"errors"
)

// DefaultLibrary is the NVML library NVML loads when given no path.
const DefaultLibrary = "libnvidia-ml.so.1"

// ErrNoGPU matches the error of a Source (or Probe, StartTelemetry) that
// found no usable GPU.
var ErrNoGPU = errors.New("no gpu")

// UnavailableError says why no GPU can be used.
type UnavailableError struct {
	// Reason is one line for the record's "reason" field.
	Reason string
	// Return is the NVML return code behind it (nvml.SUCCESS when NVML
	// answered but found zero devices).
	Return ReturnCode
}

// Error returns the reason.
func (e *UnavailableError) Error() string { return e.Reason }

// Is makes errors.Is(err, ErrNoGPU) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrNoGPU }
