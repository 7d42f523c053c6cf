//go:build linux && cgo

package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
)

// FakeGPUCAEnv names a directory where a test saved a simulated PKI
// (gpuevidencetest.CA.Save). With it, simulated Hopper GPUs run as in
// confidential-computing mode and sign SPDM reports under that PKI: their
// evidence verifies only with --gpu-root pointing at its root, and is
// always marked simulated.
const FakeGPUCAEnv = "GPUATTEST_FAKE_GPU_CA"

// EnableEvidence turns on simulated confidential computing: every
// simulated Hopper GPU gets a device key certified under ca and answers
// NVML's attestation calls with signed SPDM reports (driver and VBIOS
// versions as the simulated record states them). Simulated A100s still
// have no device attestation.
func (s *Simulated) EnableEvidence(ca *gpuevidencetest.CA) error {
	driver, ret := s.server.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("simulated driver version: %s", retText(ret))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sd := range s.devs {
		d := sd.Device
		if d.Config.Architecture != nvml.DEVICE_ARCH_HOPPER {
			continue
		}
		g, err := ca.NewGPU(gpuevidencetest.GPUOptions{Arch: gpuevidence.ArchHopper, DriverVersion: driver, VBIOSVersion: s.model.vbios})
		if err != nil {
			return fmt.Errorf("simulated GPU %d: %w", sd.index, err)
		}
		d.GetConfComputeGpuAttestationReportFunc = func(r *nvml.ConfComputeGpuAttestationReport) nvml.Return {
			rep, err := g.Report(r.Nonce)
			if err != nil || len(rep) > len(r.AttestationReport) {
				return nvml.ERROR_UNKNOWN
			}
			r.AttestationReportSize = uint32(copy(r.AttestationReport[:], rep))
			return nvml.SUCCESS
		}
		d.GetConfComputeGpuCertificateFunc = func() (nvml.ConfComputeGpuCertificate, nvml.Return) {
			var c nvml.ConfComputeGpuCertificate
			if len(g.Chain) > len(c.AttestationCertChain) {
				return c, nvml.ERROR_UNKNOWN
			}
			c.AttestationCertChainSize = uint32(copy(c.AttestationCertChain[:], g.Chain))
			return c, nvml.SUCCESS
		}
	}
	s.server.SystemGetConfComputeStateFunc = func() (nvml.ConfComputeSystemState, nvml.Return) {
		return nvml.ConfComputeSystemState{Environment: nvml.CC_SYSTEM_ENVIRONMENT_SIM, CcFeature: nvml.CC_SYSTEM_FEATURE_ENABLED}, nvml.SUCCESS
	}
	return nil
}
