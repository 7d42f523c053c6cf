package suite

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/internal/limits"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/internal/jsonstrict"
)

// ResultsSchemaID is the value of a results file's "schema" field.
const ResultsSchemaID = "https://gpuattest.dev/results/v1"

// Case statuses.
const (
	StatusPassed  = "passed"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
	StatusError   = "error"
)

// Results is a results file: what the kernel harness (or any suite) writes
// and gpuattest judges. Its JSON form is schemas/results.schema.json.
type Results struct {
	// Schema identifies the format: ResultsSchemaID.
	Schema string `json:"schema"`
	// Tool names the program that wrote the file, with its version.
	Tool string `json:"tool"`
	// Backend is where the kernels ran: cuda or cpu.
	Backend string `json:"backend"`
	// Device is the GPU model the cases ran on; omitted on cpu.
	Device string `json:"device,omitempty"`
	// DeviceUUID is the UUID of the GPU the cases ran on, as NVML names it
	// ("GPU-..."), so telemetry can judge that GPU; omitted on cpu.
	DeviceUUID string `json:"device_uuid,omitempty"`
	// DevicePCIBusID is that GPU's PCI bus id as the CUDA driver gives it
	// (e.g. "0000:3B:00.0"; NVML writes the domain with 8 digits).
	DevicePCIBusID string `json:"device_pci_bus_id,omitempty"`
	// DeviceOrdinal is the CUDA device ordinal the suite opened, among the
	// devices CUDA_VISIBLE_DEVICES leaves visible.
	DeviceOrdinal *int `json:"device_ordinal,omitempty"`
	// CUDAVisibleDevices is CUDA_VISIBLE_DEVICES as the suite saw it, when
	// set.
	CUDAVisibleDevices string `json:"cuda_visible_devices,omitempty"`
	// Devices lists the GPUs of a run over several devices (the harness's
	// --devices), one entry each; then Device is the model they share,
	// DeviceUUID is empty, every case's name ends "/gpu=I" and its config
	// names device_uuid, and Sustained sums the devices' loops.
	Devices []ResultDevice `json:"devices,omitempty"`
	// CrossDevice compares the outputs of GPUs of one model, when several
	// ran.
	CrossDevice *CrossDevice `json:"cross_device,omitempty"`
	// Sustained is present when the suite ran in sustained mode (the
	// harness's --duration, which a burnin step asks for with
	// GPUATTEST_DURATION): one process launching every case back to back.
	Sustained *Sustained `json:"sustained,omitempty"`
	// Cases are the test or benchmark cases.
	Cases []Case `json:"cases"`

	// Format is the format the file was read from: "gpuattest" or "junit".
	Format string `json:"-"`
}

// Case is one test or benchmark case.
type Case struct {
	// Name identifies the case, e.g. "vector_add/n=1048576/seed=1".
	Name string `json:"name"`
	// Kernel is the kernel the case exercises.
	Kernel string `json:"kernel,omitempty"`
	// Status is passed, failed, skipped or error.
	Status string `json:"status"`
	// Message says why, when the case did not pass.
	Message string `json:"message,omitempty"`
	// Correctness compares the output with the reference.
	Correctness *Correctness `json:"correctness,omitempty"`
	// SamplesNS are the raw per-iteration times in nanoseconds, after warmup.
	SamplesNS []float64 `json:"samples_ns,omitempty"`
	// Flops is the floating-point operations of one iteration.
	Flops float64 `json:"flops,omitempty"`
	// Bytes is the memory traffic of one iteration.
	Bytes float64 `json:"bytes,omitempty"`
	// Config holds the case's parameters as strings.
	Config map[string]string `json:"config,omitempty"`
	// OutputSHA256 is the hex sha256 of the output tensor's bytes; burn-in
	// compares it between iterations.
	OutputSHA256 string `json:"output_sha256,omitempty"`
	// DeviceMemoryUsedBytes is the device memory in use after the case
	// (cuda backend), zero when not measured.
	DeviceMemoryUsedBytes int64 `json:"device_memory_used_bytes,omitempty"`
	// Stop says why sampling stopped, for adaptive repeats
	// (GPUATTEST_REPEATS=auto).
	Stop *Stop `json:"stop,omitempty"`
	// Sustained is the case's account in a sustained run.
	Sustained *CaseSustained `json:"sustained,omitempty"`
}

// ResultDevice is one GPU of a run over several devices.
type ResultDevice struct {
	// Ordinal is the CUDA device ordinal among the visible devices.
	Ordinal int `json:"ordinal" jsonschema:"minimum=0"`
	// Name is the GPU's model.
	Name string `json:"name,omitempty"`
	// UUID is the GPU's UUID as NVML names it.
	UUID string `json:"uuid,omitempty" jsonschema:"pattern=^GPU-[0-9a-f-]+$"`
	// PCIBusID is its PCI bus id as the CUDA driver gives it.
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// Cases and Passed count the device's cases and those that passed.
	Cases  int `json:"cases" jsonschema:"minimum=0"`
	Passed int `json:"passed" jsonschema:"minimum=0"`
	// Error says why the device could not be opened.
	Error string `json:"error,omitempty"`
	// Sustained is the device's own sustained loop.
	Sustained *DeviceSustained `json:"sustained,omitempty"`
}

// DeviceSustained is one device's sustained loop in a run over several
// devices.
type DeviceSustained struct {
	ElapsedSeconds float64 `json:"elapsed_s" jsonschema:"minimum=0"`
	BusySeconds    float64 `json:"busy_s" jsonschema:"minimum=0"`
	DutyCycle      float64 `json:"duty_cycle" jsonschema:"minimum=0,maximum=1"`
	Iterations     int64   `json:"iterations" jsonschema:"minimum=0"`
	OutputsChecked int64   `json:"outputs_checked" jsonschema:"minimum=0"`
	Mismatches     int64   `json:"mismatches" jsonschema:"minimum=0"`
	Error          string  `json:"error,omitempty"`
	// LoopFromUnixNS and LoopToUnixNS are when the device's loop ran (see
	// Sustained).
	LoopFromUnixNS int64 `json:"loop_from_unix_ns,omitempty" jsonschema:"minimum=0"`
	LoopToUnixNS   int64 `json:"loop_to_unix_ns,omitempty" jsonschema:"minimum=0"`
	// Burn is what the device's burn case achieved.
	Burn *BurnThroughput `json:"burn,omitempty"`
}

// BurnThroughput is what a sustained run's burn case achieved on one
// device: its floating-point operations over the time the device spent
// in it (CUDA events), in total and per window of the loop, so that a
// GPU that computes slowly, or slows down, shows.
type BurnThroughput struct {
	// Kernel is the burn kernel: hmma (tensor cores, fp16 inputs, fp32
	// accumulate) or ffma.
	Kernel string `json:"kernel"`
	// Launches counts the burn case's launches in the loop.
	Launches int64 `json:"launches" jsonschema:"minimum=0"`
	// Flops and BusySeconds are their floating-point operations and the
	// device time they took.
	Flops       float64 `json:"flops" jsonschema:"minimum=0"`
	BusySeconds float64 `json:"busy_s" jsonschema:"minimum=0"`
	// TFLOPS is Flops / BusySeconds / 1e12.
	TFLOPS float64 `json:"tflops" jsonschema:"minimum=0"`
	// WindowSeconds is the windows' length.
	WindowSeconds float64 `json:"window_s" jsonschema:"minimum=0"`
	// Windows are the launches grouped by when they ended, from the
	// loop's start; a window without a launch is left out.
	Windows []BurnWindow `json:"windows,omitempty"`
}

// BurnWindow is the burn case's work in one window of a sustained loop.
type BurnWindow struct {
	// FromSeconds and ToSeconds bound the window, from the loop's start.
	FromSeconds float64 `json:"from_s" jsonschema:"minimum=0"`
	ToSeconds   float64 `json:"to_s" jsonschema:"minimum=0"`
	// Flops and BusySeconds are the launches that ended in it.
	Flops       float64 `json:"flops" jsonschema:"minimum=0"`
	BusySeconds float64 `json:"busy_s" jsonschema:"minimum=0"`
}

// CrossDevice is the comparison of each case's output between the GPUs
// of one model: the same seed and deterministic kernels give the same
// bits on every healthy GPU.
type CrossDevice struct {
	// Devices is the number of GPUs that ran.
	Devices int `json:"devices" jsonschema:"minimum=0"`
	// CasesCompared counts the cases compared across at least two GPUs.
	CasesCompared int64 `json:"cases_compared" jsonschema:"minimum=0"`
	// Disagreements name each case and GPU whose output differed from the
	// others' (the case fails on that GPU).
	Disagreements []string `json:"disagreements"`
}

// Timing sources of a sustained run.
const (
	// TimingCUDAEvents: busy time from CUDA events around every repeat,
	// wall time from an event pair around the whole loop.
	TimingCUDAEvents = "cuda_events"
	// TimingSteadyClock: busy time is the wall time threads spent in
	// kernels, by the host's monotonic clock.
	TimingSteadyClock = "steady_clock"
)

// Sustained is a sustained run: every case set up once in one process,
// then launched back to back for a duration, the output of every repeat
// compared with the first.
type Sustained struct {
	// DurationSeconds is the duration asked for.
	DurationSeconds float64 `json:"duration_s"`
	// ElapsedSeconds is the wall time of the loop.
	ElapsedSeconds float64 `json:"elapsed_s"`
	// BusySeconds is the time the device (or the threads) spent in
	// kernels, summed over threads on cpu.
	BusySeconds float64 `json:"busy_s"`
	// DutyCycle is the busy share of the loop's wall time (per thread on
	// cpu), from 0 to 1.
	DutyCycle float64 `json:"duty_cycle"`
	// Timing is how busy time was measured: cuda_events or steady_clock.
	Timing string `json:"timing"`
	// Threads is the number of worker threads (cpu).
	Threads int `json:"threads,omitempty"`
	// CPUSeconds is the CPU time the process used in the loop (cpu): less
	// than BusySeconds on a machine shared with other work.
	CPUSeconds *float64 `json:"cpu_s,omitempty"`
	// Iterations is the number of rounds, each launching every case once
	// (summed over threads on cpu).
	Iterations int64 `json:"iterations"`
	// OutputsChecked is the number of repeats whose output was compared
	// with the first repeat's; Mismatches how many differed.
	OutputsChecked int64 `json:"outputs_checked"`
	Mismatches     int64 `json:"mismatches"`
	// Consistent is true when no output differed and the loop ran to the
	// end.
	Consistent bool `json:"consistent"`
	// Check is how outputs were compared: "bytes" (every byte, cpu) or
	// "checksum64" (a 64-bit checksum computed on the device, cuda).
	Check string `json:"check"`
	// MemoryIntervalSeconds is how often Memory was sampled.
	MemoryIntervalSeconds float64 `json:"memory_interval_s,omitempty"`
	// Memory are the process's memory samples over the loop.
	Memory []MemorySample `json:"memory,omitempty"`
	// Error says why the loop stopped early or did not run.
	Error string `json:"error,omitempty"`
	// LoopFromUnixNS and LoopToUnixNS are when the loop ran (Unix
	// nanoseconds, the suite's host clock; over several devices, the span
	// of their loops), so that telemetry of the loop can be told from the
	// setup's; absent when the suite does not say.
	LoopFromUnixNS int64 `json:"loop_from_unix_ns,omitempty"`
	LoopToUnixNS   int64 `json:"loop_to_unix_ns,omitempty"`
	// Burn is what the burn case achieved, in a run on one device.
	Burn *BurnThroughput `json:"burn,omitempty"`
}

// MemorySample is one memory reading of a sustained run.
type MemorySample struct {
	// ElapsedSeconds is the time since the loop started.
	ElapsedSeconds float64 `json:"elapsed_s"`
	// Iteration is the number of rounds completed by then.
	Iteration int64 `json:"iteration"`
	// HostRSSBytes is the process's resident set size.
	HostRSSBytes int64 `json:"host_rss_bytes,omitempty"`
	// DeviceUsedBytes is the device memory in use (device-wide, cuda).
	DeviceUsedBytes int64 `json:"device_used_bytes,omitempty"`
}

// CaseSustained is one case's account in a sustained run.
type CaseSustained struct {
	// Repeats counts the case's launches, the first (checked against the
	// reference) included.
	Repeats int64 `json:"repeats"`
	// Mismatches counts the repeats whose output differed from the first;
	// FirstMismatch is the earliest (1 is the first repeat).
	Mismatches    int64 `json:"mismatches"`
	FirstMismatch int64 `json:"first_mismatch,omitempty"`
	// BusySeconds is the time spent in this case's kernels.
	BusySeconds float64 `json:"busy_s"`
}

// Stop reasons of adaptive repeats.
const (
	// StopPrecision: the 95 % interval of the median reached ±precision.
	StopPrecision = "precision"
	// StopMaxTime: the case sampled for the whole GPUATTEST_MAX_TIME.
	StopMaxTime = "max_time"
	// StopMaxSamples: the suite's own cap on samples was reached.
	StopMaxSamples = "max_samples"
)

// Stop says why a case with adaptive repeats stopped sampling.
type Stop struct {
	// Reason is precision, max_time or max_samples.
	Reason string `json:"reason"`
	// ElapsedSeconds is how long the case sampled.
	ElapsedSeconds float64 `json:"elapsed_s"`
}

// Correctness compares a kernel's output with its reference.
type Correctness struct {
	MaxAbsError  float64 `json:"max_abs_error"`
	MeanAbsError float64 `json:"mean_abs_error"`
	Correlation  float64 `json:"correlation"`
	Tolerance    float64 `json:"tolerance"`
}

// Counts tallies case statuses.
type Counts struct {
	Total   int `json:"total"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Errored int `json:"errored"`
	Skipped int `json:"skipped"`
}

// Count tallies r's cases by status.
func (r *Results) Count() Counts {
	c := Counts{Total: len(r.Cases)}
	for _, k := range r.Cases {
		switch k.Status {
		case StatusPassed:
			c.Passed++
		case StatusFailed:
			c.Failed++
		case StatusError:
			c.Errored++
		case StatusSkipped:
			c.Skipped++
		}
	}
	return c
}

// Formats accepted by ReadResultsFormat.
const (
	FormatAuto      = "auto"
	FormatGpuattest = "gpuattest"
	FormatJUnit     = "junit"
)

// ReadResults reads a results file in the gpuattest JSON format or as JUnit
// XML (pytest, ctest, gotestsum), telling them apart by extension and then
// by content.
func ReadResults(path string) (*Results, error) { return ReadResultsFormat(path, FormatAuto) }

// ReadResultsFormat reads a results file in the given format ("auto",
// "gpuattest" or "junit"; empty means auto). Errors name the file and, for
// syntax errors, the line and column; schema violations name the field.
func ReadResultsFormat(path, format string) (*Results, error) {
	b, err := limits.ReadFile(path, limits.ResultsBytes, "results file")
	if err != nil {
		return nil, readResultsError(path, err)
	}
	return parseResults(path, b, format)
}

func readResultsError(path string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("results file %s does not exist\nhint: the step's command must write it (results: names it, relative to the step's workdir)", path)
	}
	return fmt.Errorf("reading results: %w", err)
}

// parseResults parses b, read from path, in format.
func parseResults(path string, b []byte, format string) (*Results, error) {
	if format == "" || format == FormatAuto {
		format = sniff(path, b)
	}
	switch format {
	case FormatGpuattest:
		return parseResultsJSON(path, b)
	case FormatJUnit:
		return parseJUnit(path, b)
	}
	return nil, fmt.Errorf("results format %q: expected auto, gpuattest or junit", format)
}

func sniff(path string, b []byte) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".xml":
		return FormatJUnit
	case ".json":
		return FormatGpuattest
	}
	if t := bytes.TrimLeft(b, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '<' {
		return FormatJUnit
	}
	return FormatGpuattest
}

// maxResultsDepth is the deepest nesting of objects and arrays a results
// file may have; the format needs four.
const maxResultsDepth = 32

// resultsHint ends the problems of a results file.
const resultsHint = "expected a gpuattest results JSON object (schemas/results.schema.json)"

// parseResultsJSON reads a results file the one way gpuattest reads a
// document: strict syntax and shape (jsonstrict.Decode), then Validate.
func parseResultsJSON(path string, b []byte) (*Results, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%s: empty results file\nhint: %s", path, resultsHint)
	}
	var r Results
	probs := jsonstrict.Read(path, b, maxResultsDepth, &r)
	if len(probs) > 0 {
		if probs[len(probs)-1].Hint == "" {
			probs[len(probs)-1].Hint = resultsHint
		}
		return nil, probs
	}
	r.Format = FormatGpuattest
	return &r, nil
}
