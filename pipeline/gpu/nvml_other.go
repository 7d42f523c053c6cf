//go:build !(linux && cgo)

package gpu

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/hardware"
)

// This build has no NVML: go-nvml needs cgo and Linux. Everything that
// reads a GPU says so, naming the platform, and the portable parts
// (records, preflight on a record, summaries, verdicts) work as on Linux.

// NoNVMLReason says why this build reads no GPU.
const NoNVMLReason = "no NVML: gpuattest built for " + runtime.GOOS + "/" + runtime.GOARCH + " without cgo (GPU steps need linux with cgo)"

// ReturnCode is the NVML return code an UnavailableError carries; always
// 0 in a build without NVML.
type ReturnCode int32

// Source is where device data comes from. A build without NVML has one
// source, NVML, which is always unavailable.
type Source interface {
	// Simulated is true for simulated GPUs (never in this build).
	Simulated() bool
	// String names the source for messages.
	String() string
}

type noNVML struct{ path string }

func (s *noNVML) Simulated() bool { return false }

func (s *noNVML) String() string { return "nvml (" + s.path + ", " + NoNVMLReason + ")" }

// NVML returns the NVML source, which in this build reads no GPU: Collect
// records NoNVMLReason, Probe and StartTelemetry return an
// *UnavailableError.
func NVML(libraryPath string) Source {
	if libraryPath == "" {
		libraryPath = DefaultLibrary
	}
	return &noNVML{path: libraryPath}
}

// errNoNVML is the error of everything that needs NVML.
func errNoNVML() error { return &UnavailableError{Reason: NoNVMLReason} }

// SourceFromEnv returns NVML(""); simulated GPUs (fake set) need the
// mock NVML servers, built only on linux with cgo, so a set fake is an
// error.
func SourceFromEnv(fake string) (Source, error) {
	if fake != "" {
		return nil, errors.New(FakeGPUEnv + ": simulated GPUs need go-nvml's mock servers: " + NoNVMLReason)
	}
	return NVML(""), nil
}

// WithFakeGPU fails for a non-empty spec: simulated GPUs need linux with
// cgo.
func WithFakeGPU(spec string) Option {
	return func(o *options) error {
		if spec == "" {
			return nil
		}
		_, err := SourceFromEnv(spec)
		return err
	}
}

// collectGPUs records why this build reads no GPU.
func collectGPUs(_ context.Context, o *options, rec *hardware.Record) error {
	rec.Reason = NoNVMLReason
	o.logger.Info("no gpu", "source", o.src.String(), "reason", rec.Reason)
	return nil
}

// Probe returns an *UnavailableError: no NVML in this build.
func Probe(context.Context, Source) (*Live, error) { return nil, errNoNVML() }

// Telemetry samples GPUs in the background; in this build it never
// starts.
type Telemetry struct{}

// StartTelemetry returns an *UnavailableError: no NVML in this build.
func StartTelemetry(context.Context, Source, string, time.Duration, ...TelemetryOption) (*Telemetry, error) {
	return nil, errNoNVML()
}

// Stop returns an *UnavailableError: no NVML in this build.
func (t *Telemetry) Stop() (*Summary, error) { return nil, errNoNVML() }

// StopFor returns an *UnavailableError: no NVML in this build.
func (t *Telemetry) StopFor(string) (*Summary, error) { return nil, errNoNVML() }

// CollectEvidence returns an *UnavailableError: no NVML in this build.
func CollectEvidence(context.Context, Source, gpuevidence.Nonce, ...EvidenceOption) ([]gpuevidence.Collected, error) {
	return nil, errNoNVML()
}

// Unsupported says why this build reads no GPU, naming the platform:
// go-nvml needs linux with cgo.
func Unsupported() error {
	return errors.New("gpuattest was built for " + runtime.GOOS + "/" + runtime.GOARCH + " without cgo, so it has no NVML: GPU steps, device and fleet node need linux with cgo\nhint: run this on a Linux GPU machine with a gpuattest built with CGO_ENABLED=1 (the linux release binaries are); verify, pull, report, inspect, compare and fleet verify work here")
}
