package gpu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// DefaultLibrary is the NVML library NVML loads when given no path.
const DefaultLibrary = "libnvidia-ml.so.1"

// Source provides NVML: the real library (NVML) or simulated GPUs
// (Simulate). Collect, Probe and StartTelemetry read devices only through
// a Source, so the real driver and the mock servers plug in the same way.
type Source interface {
	// Open initialises NVML and returns it with a function that releases
	// it. When no GPU can be reached it returns an *UnavailableError
	// saying why (it matches ErrNoGPU).
	Open() (nvml.Interface, func(), error)
	// Simulated reports whether the devices are simulated.
	Simulated() bool
	// String names the source for messages ("nvml", "simulated h100:8").
	String() string
}

// ErrNoGPU matches the error of a Source (or Probe, StartTelemetry) that
// found no usable GPU.
var ErrNoGPU = errors.New("no gpu")

// UnavailableError says why no GPU can be used.
type UnavailableError struct {
	// Reason is one line for the record's "reason" field.
	Reason string
	// Return is the NVML return code behind it (nvml.SUCCESS when NVML
	// answered but found zero devices).
	Return nvml.Return
}

// Error returns the reason.
func (e *UnavailableError) Error() string { return e.Reason }

// Is makes errors.Is(err, ErrNoGPU) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrNoGPU }

// NVML returns the real NVML source. It loads libraryPath with dlopen
// (DefaultLibrary when empty) at every Open; a missing library, a driver
// that is not loaded and zero devices are reported as *UnavailableError.
func NVML(libraryPath string) Source {
	if libraryPath == "" {
		libraryPath = DefaultLibrary
	}
	return &nvmlSource{path: libraryPath}
}

type nvmlSource struct {
	path string

	mu  sync.Mutex
	lib nvml.Interface
}

func (s *nvmlSource) Simulated() bool { return false }

func (s *nvmlSource) String() string { return "nvml (" + s.path + ")" }

func (s *nvmlSource) Open() (nvml.Interface, func(), error) {
	s.mu.Lock()
	if s.lib == nil {
		s.lib = nvml.New(nvml.WithLibraryPath(s.path))
	}
	lib := s.lib
	s.mu.Unlock()

	ret := lib.Init()
	if ret != nvml.SUCCESS {
		// Shutdown must not be called: the library may not even be loaded.
		return nil, nil, initError(s.path, ret)
	}
	release := sync.OnceFunc(func() { lib.Shutdown() })
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		release()
		return nil, nil, &UnavailableError{Reason: "NVML could not count devices: " + ret.Error(), Return: ret}
	}
	if n == 0 {
		release()
		return nil, nil, &UnavailableError{Reason: "NVIDIA driver loaded but it reports zero GPUs", Return: nvml.SUCCESS}
	}
	return lib, release, nil
}

// initError turns a failed nvmlInit into the reason the record shows.
func initError(path string, ret nvml.Return) error {
	var reason string
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		reason = fmt.Sprintf("NVML library %s not found: no NVIDIA driver installed on this machine", path)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		reason = "NVIDIA driver not loaded (NVML found no running kernel module)"
	case nvml.ERROR_NO_PERMISSION:
		reason = "no permission to talk to the NVIDIA driver (check /dev/nvidia* permissions)"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		reason = "NVML library and NVIDIA kernel module versions differ (reboot or reload the driver)"
	default:
		reason = "NVML initialisation failed: " + ret.Error()
	}
	return &UnavailableError{Reason: reason, Return: ret}
}
