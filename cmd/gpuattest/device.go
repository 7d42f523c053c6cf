package main

import (
	"fmt"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/internal/textsafe"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

// nvmlLibraryEnv names the NVML library to load instead of
// libnvidia-ml.so.1 (drivers installed in unusual places).
const nvmlLibraryEnv = "GPUATTEST_NVML_LIBRARY"

func init() { verbs = append(verbs, newDeviceCmd) }

func newDeviceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "device",
		Short: "Print this machine's hardware record (host, driver, GPUs)",
		Long: `device prints the hardware record every run stores and every attestation
carries: host, NVIDIA driver, CUDA and NVML versions, and every GPU as NVML
reports it, with the record's digest. With no GPU the list is empty and a
reason says why; no device is ever invented.

Environment:
  GPUATTEST_FAKE_GPU=h100|a100|h200[:N]   serve N simulated GPUs from go-nvml's
                                          mock servers (marked simulated)
  GPUATTEST_NVML_LIBRARY=PATH             load NVML from PATH instead of
                                          libnvidia-ml.so.1`,
		Args: cobra.NoArgs,
	}
	out := outputFlag(c)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := checkOutput(*out); err != nil {
			return err
		}
		if err := run.GPUUnsupported(); err != nil {
			return withCode(exitUsage, fmt.Errorf("device: %w", err))
		}
		src, err := gpuSource()
		if err != nil {
			return withCode(exitUsage, err)
		}
		rec, err := run.Hardware(c.Context(), src)
		if err != nil {
			return withCode(exitFailed, err)
		}
		if *out == "json" {
			return writeJSON(c.OutOrStdout(), rec)
		}
		return printRecord(c.OutOrStdout(), rec)
	}
	return c
}

// gpuSource is the device source this process uses: simulated GPUs when
// GPUATTEST_FAKE_GPU is set, the real NVML otherwise.
func gpuSource() (run.GPUSource, error) {
	return run.GPUSourceFor(os.Getenv(run.FakeGPUEnv), os.Getenv(nvmlLibraryEnv))
}

// printRecord renders the record as text: a banner when simulated, host
// and driver lines, then one table row per GPU.
func printRecord(w io.Writer, rec *hardware.Record) error {
	var b strings.Builder
	if rec.Simulated {
		b.WriteString("SIMULATED: these GPUs come from " + run.FakeGPUEnv + " (go-nvml mock servers), not from hardware\n\n")
	}
	h := rec.Host
	host := orDash(h.CPUModel)
	if h.CPUCores > 0 {
		host += fmt.Sprintf(" (%d CPUs)", h.CPUCores)
	}
	if h.MemoryBytes > 0 {
		host += ", " + pipeline.FormatSize(h.MemoryBytes) + " RAM"
	}
	fmt.Fprintf(&b, "host:    %s\n", textsafe.Line(host))
	fmt.Fprintf(&b, "os:      %s, kernel %s\n", orDash(h.OS), orDash(h.Kernel))
	if rec.DriverVersion != "" || rec.CUDADriverVersion != "" || rec.NVMLVersion != "" {
		fmt.Fprintf(&b, "driver:  %s (CUDA %s, NVML %s)\n", orDash(rec.DriverVersion), orDash(rec.CUDADriverVersion), orDash(rec.NVMLVersion))
	}
	fmt.Fprintf(&b, "digest:  %s\n", rec.Digest)
	if len(rec.GPUs) == 0 {
		fmt.Fprintf(&b, "gpus:    none: %s\n", textsafe.Line(rec.Reason))
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tNAME\tCC\tMEMORY\tECC\tMIG\tPERSIST\tPOWER\tMAX SM/MEM\tPCIE\tHEALTH\tBUS\tUUID")
	for _, g := range rec.GPUs {
		mem := "-"
		if g.MemoryTotalBytes != nil {
			mem = pipeline.FormatSize(*g.MemoryTotalBytes)
		}
		power := "-"
		if g.PowerLimitWatts != nil {
			power = strconv.FormatFloat(*g.PowerLimitWatts, 'f', -1, 64) + " W"
		}
		clocks := "-"
		if c := g.MaxClocksMHz; c != nil {
			clocks = u32(c.SM) + "/" + u32(c.Mem) + " MHz"
		}
		pcie := "-"
		if p := g.PCIe; p != nil {
			pcie = "gen" + intp(p.Gen) + " x" + intp(p.Width)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Index, orDash(g.Name), orDash(g.ComputeCapability), mem,
			onOff(g.ECCEnabled), onOff(g.MIGEnabled), onOff(g.PersistenceMode), power, clocks, pcie, health(g), orDash(g.PCIBusID), orDash(g.UUID))
	}
	return tw.Flush()
}

func health(g hardware.GPU) string {
	if g.Error != "" {
		return "error: " + g.Error
	}
	var bad []string
	if g.RetiredPagesPending != nil && *g.RetiredPagesPending {
		bad = append(bad, "retirement pending")
	}
	if g.RemappedRowsFailed != nil && *g.RemappedRowsFailed {
		bad = append(bad, "row remap failed")
	}
	if g.RemappedRowsPending != nil && *g.RemappedRowsPending {
		bad = append(bad, "row remap pending")
	}
	if a := g.RecoveryAction; a != "" && a != "none" {
		bad = append(bad, "recovery action "+a)
	}
	if len(bad) > 0 {
		return strings.Join(bad, ", ")
	}
	if g.RetiredPagesPending == nil && g.RemappedRowsFailed == nil {
		return "-"
	}
	return "ok"
}

// orDash is s for a terminal (textsafe.Line), or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return textsafe.Line(s)
}

func onOff(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "on"
	}
	return "off"
}

func u32(v *uint32) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatUint(uint64(*v), 10)
}

func intp(v *int) string {
	if v == nil {
		return "?"
	}
	return strconv.Itoa(*v)
}
