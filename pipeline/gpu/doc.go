// Package gpu captures the hardware a run used and watches it while GPU
// steps run.
//
// Three jobs, one device source:
//
//   - Collect reads the hardware record (host, driver, every GPU) from NVML
//     through a Source. With no GPU it says why (no library, driver not
//     loaded, zero devices) and never invents a device. A metric a GPU does
//     not support is omitted, not zero.
//   - Preflight checks a record (plus a live Probe of free memory and
//     running processes) against a pipeline's preflight block and the
//     targets the build embedded.
//   - StartTelemetry samples temperature, power, clocks, clock-event reasons
//     and memory into a JSONL file, listens for Xid and double-bit ECC
//     events, reads the ECC and row-remap counters before and after, and
//     returns a Summary with a Verdict.
//
// A Source is either the real NVML (NVML, which dlopens libnvidia-ml.so.1)
// or simulated GPUs served from go-nvml's mock servers (Simulate, selected
// in the CLI by GPUATTEST_FAKE_GPU=h100|a100|h200[:N]). Everything derived
// from a simulated source says "simulated": true.
package gpu
