// Package hardware is the hardware record every run stores (hardware.json)
// and every GPU validation attestation carries: host, NVIDIA driver, CUDA
// and NVML versions, and every GPU as NVML reports it, with a digest over
// its canonical JSON.
//
// It holds only the record's types, its digest and its decoding, so that
// the attestation side (attest) reads records without linking NVML;
// pipeline/gpu fills records from NVML or simulated devices. Read a record
// from disk only through Decode, which validates it against
// schemas/hardware.schema.json and checks its digest.
package hardware
