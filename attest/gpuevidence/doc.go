// Package gpuevidence verifies the evidence NVIDIA GPUs sign, offline and
// in pure Go (no cgo, no network).
//
// A Hopper GPU in confidential-computing or protected-PCIe mode, and a
// Blackwell GPU in any mode, signs an SPDM 1.1 GET_MEASUREMENTS response
// over a caller's nonce with a device key certified up to NVIDIA's Device
// Identity CA. NVIDIA's tools serialize it as a JSON array of {arch,
// nonce, evidence, certificate} items (ParseFile, Item). A Verifier
// checks, for each GPU (Verify, Claim):
//
//   - the report parses (ParseAttestationReport: the request, then the
//     measurement blocks, nonce, opaque fields and raw P-384 signature of
//     the response);
//   - the signature over SHA-384(request || response without signature)
//     verifies with the leaf certificate's key;
//   - the chain verifies to the pinned NVIDIA Device Identity CA
//     (NVIDIADeviceRoot; WithDeviceRoot replaces it for tests, and every
//     GPU so verified is reported as not NVIDIA-rooted);
//   - the signed nonce equals the one the caller recomputed (FleetNonce,
//     RunNonce): never the one the evidence states;
//   - the report's FWID equals the FWID of the leaf's DICE extension
//     (2.23.133.5.4.1 on Hopper, 2.23.133.5.4.1.1 on Blackwell); a report
//     without one fails (NVIDIA's verifier lets it pass);
//   - with Collateral: the driver and VBIOS RIMs (XML-DSig, Canonical XML
//     1.1, up to the pinned RIM root, NVIDIARIMRoot) cover disjoint
//     indexes and each golden measurement, with its alternatives, equals
//     the report's (index 35 skipped while NVDEC0 is disabled); stored OCSP
//     answers are judged. Certificates, RIMs and OCSP answers are judged
//     as of WithTime: the time the evidence was recorded.
//
// Each GPU comes out StatusMatched (device-signed, measurements
// matched), StatusNotChecked (device-signed, measurements not checked,
// with the reason), or StatusFailed (with every problem, the GPU named);
// StatusUnattested is for a GPU that gave no evidence. The package never
// prints and reads no file but those its loaders are given.
//
// gpuevidencetest makes simulated evidence under a test PKI it
// generates, for tests and the simulated GPU.
package gpuevidence
