//go:build linux && cgo

package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

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
}

func (s *nvmlSource) Simulated() bool { return false }

func (s *nvmlSource) String() string { return "nvml (" + s.path + ")" }

// driverProcDir exists while the NVIDIA kernel module is loaded (also in
// containers given GPUs). A variable so tests can point it elsewhere.
var driverProcDir = "/proc/driver/nvidia"

// wslDevice is WSL2's GPU paravirtualisation device; with it, the NVIDIA
// driver runs on the Windows host and /proc/driver/nvidia never exists.
// A variable so tests can point it elsewhere.
var wslDevice = "/dev/dxg"

// ReturnCode is the NVML return code an UnavailableError carries.
type ReturnCode = nvml.Return

// go-nvml keeps package-level state (symbol table, error strings) that it
// rewrites whenever a library instance is (re)loaded. So every source of
// one path shares one instance, Init and Shutdown are serialised, and the
// first successful Init is pinned for the life of the process: the library
// is loaded once and never reloaded under a running reader.
var shared struct {
	sync.Mutex
	libs   map[string]nvml.Interface
	pinned map[string]bool
}

func (s *nvmlSource) Open() (nvml.Interface, func(), error) {
	// Loading and initialising libnvidia-ml only to learn that no driver
	// runs costs tens of milliseconds on every gpuattest run; the kernel
	// module's /proc directory answers the same question for free.
	// Under WSL2 there is no such directory: the GPU is reached through
	// /dev/dxg and the Windows driver, and NVML works.
	if s.path == DefaultLibrary {
		_, err := os.Stat(driverProcDir)
		if _, dxg := os.Stat(wslDevice); errors.Is(err, fs.ErrNotExist) && dxg != nil {
			return nil, nil, &UnavailableError{Reason: "NVIDIA driver not loaded (no " + driverProcDir + ": the kernel module is not running)", Return: nvml.ERROR_DRIVER_NOT_LOADED}
		}
	}
	shared.Lock()
	defer shared.Unlock()
	if shared.libs == nil {
		shared.libs, shared.pinned = map[string]nvml.Interface{}, map[string]bool{}
	}
	lib, ok := shared.libs[s.path]
	if !ok {
		lib = nvml.New(nvml.WithLibraryPath(s.path))
		shared.libs[s.path] = lib
	}
	ret := lib.Init()
	if ret != nvml.SUCCESS {
		// Shutdown must not be called: the library may not even be loaded.
		return nil, nil, initError(s.path, ret)
	}
	if !shared.pinned[s.path] && lib.Init() == nvml.SUCCESS {
		shared.pinned[s.path] = true
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, nil, &UnavailableError{Reason: "NVML could not count devices: " + retText(ret), Return: ret}
	}
	if n == 0 {
		lib.Shutdown()
		return nil, nil, &UnavailableError{Reason: "NVIDIA driver loaded but it reports zero GPUs", Return: nvml.SUCCESS}
	}
	release := sync.OnceFunc(func() {
		shared.Lock()
		defer shared.Unlock()
		lib.Shutdown()
	})
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
		reason = "NVML initialisation failed: " + retText(ret)
	}
	return &UnavailableError{Reason: reason, Return: ret}
}

// nvmlReturnText names NVML return codes without go-nvml's Return.Error,
// which reads package state that loading the library rewrites.
var nvmlReturnText = map[nvml.Return]string{
	nvml.ERROR_UNINITIALIZED:           "NVML not initialised",
	nvml.ERROR_INVALID_ARGUMENT:        "invalid argument",
	nvml.ERROR_NOT_SUPPORTED:           "not supported",
	nvml.ERROR_NO_PERMISSION:           "no permission",
	nvml.ERROR_NOT_FOUND:               "not found",
	nvml.ERROR_INSUFFICIENT_SIZE:       "insufficient size",
	nvml.ERROR_INSUFFICIENT_POWER:      "insufficient power",
	nvml.ERROR_DRIVER_NOT_LOADED:       "driver not loaded",
	nvml.ERROR_TIMEOUT:                 "timeout",
	nvml.ERROR_IRQ_ISSUE:               "interrupt problem",
	nvml.ERROR_LIBRARY_NOT_FOUND:       "library not found",
	nvml.ERROR_FUNCTION_NOT_FOUND:      "function not found in the library",
	nvml.ERROR_CORRUPTED_INFOROM:       "corrupted infoROM",
	nvml.ERROR_GPU_IS_LOST:             "GPU is lost",
	nvml.ERROR_RESET_REQUIRED:          "GPU reset required",
	nvml.ERROR_OPERATING_SYSTEM:        "operating system error",
	nvml.ERROR_LIB_RM_VERSION_MISMATCH: "library and kernel module versions differ",
	nvml.ERROR_IN_USE:                  "in use",
	nvml.ERROR_MEMORY:                  "out of memory",
	nvml.ERROR_NO_DATA:                 "no data",
	nvml.ERROR_UNKNOWN:                 "unknown error",
}

// retText describes an NVML return code, e.g. "not supported (NVML 3)".
func retText(ret nvml.Return) string {
	if s, ok := nvmlReturnText[ret]; ok {
		return fmt.Sprintf("%s (NVML %d)", s, int32(ret))
	}
	return fmt.Sprintf("NVML error %d", int32(ret))
}

// Unsupported is nil: this build reads GPUs through NVML. Built without
// cgo or for another OS, it says why no GPU can be read.
func Unsupported() error { return nil }
