//go:build linux && cgo

package gpu

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
)

// CollectEvidence asks every GPU src serves to sign nonce, and returns
// one entry per GPU in NVML order: its evidence, or why it has none.
// Sources, in order: NVML's confidential-computing calls (Hopper or later
// in CC or protected-PCIe mode), then nvattest on the PATH (Blackwell and
// later, any mode). A GPU without either is unattested, with the reason
// ("NVIDIA A100-SXM4-80GB: no device attestation (Ampere)", "NVIDIA H100
// 80GB HBM3 not in CC mode", "nvattest not installed"). With no usable
// GPU the list is empty. The error is for a cancelled ctx and bad
// options; what a GPU could not do is its reason.
func CollectEvidence(ctx context.Context, src Source, nonce gpuevidence.Nonce, opts ...EvidenceOption) ([]gpuevidence.Collected, error) {
	o := evidenceOptions{lookPath: exec.LookPath, timeout: 2 * time.Minute}
	for _, f := range opts {
		if err := f(&o); err != nil {
			return nil, err
		}
	}
	if o.nonceFor == nil {
		o.nonceFor = func(string) gpuevidence.Nonce { return nonce }
	}
	lib, release, err := src.Open()
	if err != nil {
		if errors.Is(err, ErrNoGPU) {
			return nil, nil
		}
		return nil, err
	}
	defer release()
	cc, ccWhy := ccMode(lib)
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, nil
	}
	var out []gpuevidence.Collected
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := gpuevidence.Collected{Index: i}
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			c.Reason = "NVML could not open the device: " + retText(ret)
			out = append(out, c)
			continue
		}
		c.UUID, _ = dev.GetUUID()
		c.Name, _ = dev.GetName()
		arch, ret := dev.GetArchitecture()
		var archName gpuevidence.Arch
		switch {
		case ret != nvml.SUCCESS:
			c.Reason = fmt.Sprintf("%s: architecture unknown (NVML: %s), no device attestation", c.Name, retText(ret))
		case arch == nvml.DEVICE_ARCH_HOPPER:
			archName = gpuevidence.ArchHopper
		case arch >= nvml.DEVICE_ARCH_BLACKWELL && arch != nvml.DEVICE_ARCH_UNKNOWN:
			archName = gpuevidence.ArchBlackwell
		default:
			c.Reason = fmt.Sprintf("%s: no device attestation (%s)", c.Name, archText(arch))
		}
		if archName == "" {
			out = append(out, c)
			continue
		}
		gpuNonce := o.nonceFor(c.UUID)
		var why []string
		if cc {
			it, err := nvmlEvidence(dev, archName, gpuNonce)
			if err == nil {
				c.Evidence, c.Source = it, gpuevidence.SourceNVML
				if src.Simulated() {
					c.Source = gpuevidence.SourceSimulated
				}
				out = append(out, c)
				continue
			}
			why = append(why, "NVML: "+err.Error())
		} else {
			why = append(why, c.Name+" not in CC mode ("+ccWhy+")")
		}
		if archName == gpuevidence.ArchBlackwell && !src.Simulated() {
			it, err := o.nvattest(ctx, i, gpuNonce)
			if err == nil {
				c.Evidence, c.Source = it, gpuevidence.SourceNVAttest
				out = append(out, c)
				continue
			}
			why = append(why, err.Error())
		}
		c.Reason = strings.Join(why, "; ")
		out = append(out, c)
	}
	return out, nil
}

// ccMode reports whether NVML's confidential-computing calls answer: CC
// on, or protected PCIe; else why not.
func ccMode(lib nvml.Interface) (bool, string) {
	st, ret := lib.SystemGetConfComputeState()
	if ret != nvml.SUCCESS {
		return false, "NVML cannot tell the CC mode: " + retText(ret)
	}
	if st.CcFeature == nvml.CC_SYSTEM_FEATURE_ENABLED {
		return true, ""
	}
	if set, ret := lib.SystemGetConfComputeSettings(); ret == nvml.SUCCESS && set.MultiGpuMode == nvml.CC_SYSTEM_MULTIGPU_PROTECTED_PCIE {
		return true, ""
	}
	return false, "confidential computing and protected PCIe are off"
}

// nvmlEvidence asks one GPU for its report over nonce and its chain.
func nvmlEvidence(dev nvml.Device, arch gpuevidence.Arch, nonce gpuevidence.Nonce) (*gpuevidence.Item, error) {
	rep := nvml.ConfComputeGpuAttestationReport{Nonce: nonce}
	if ret := dev.GetConfComputeGpuAttestationReport(&rep); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("attestation report: %s", retText(ret))
	}
	if rep.AttestationReportSize == 0 || int(rep.AttestationReportSize) > len(rep.AttestationReport) {
		return nil, fmt.Errorf("attestation report: size %d", rep.AttestationReportSize)
	}
	cert, ret := dev.GetConfComputeGpuCertificate()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("certificate chain: %s", retText(ret))
	}
	if cert.AttestationCertChainSize == 0 || int(cert.AttestationCertChainSize) > len(cert.AttestationCertChain) {
		return nil, fmt.Errorf("certificate chain: size %d", cert.AttestationCertChainSize)
	}
	it := &gpuevidence.Item{
		Arch:        arch,
		Nonce:       hex.EncodeToString(nonce[:]),
		Evidence:    base64.StdEncoding.EncodeToString(rep.AttestationReport[:rep.AttestationReportSize]),
		Certificate: base64.StdEncoding.EncodeToString(cert.AttestationCertChain[:cert.AttestationCertChainSize]),
	}
	return it, checkCollected(it, nonce)
}

// archText names an NVML architecture.
func archText(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "Kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "Maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "Pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada"
	}
	return fmt.Sprintf("architecture %d", a)
}
