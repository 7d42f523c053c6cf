package gpu

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
)

// NVAttest is the NVIDIA command that collects a Blackwell GPU's
// evidence in any mode.
const NVAttest = "nvattest"

// EvidenceOption configures CollectEvidence.
type EvidenceOption func(*evidenceOptions) error

type evidenceOptions struct {
	nonceFor func(uuid string) gpuevidence.Nonce
	lookPath func(string) (string, error)
	timeout  time.Duration
}

// WithNoncePerGPU asks each GPU for its own nonce (FleetNonce with the
// GPU's UUID) instead of one for all.
func WithNoncePerGPU(f func(uuid string) gpuevidence.Nonce) EvidenceOption {
	return func(o *evidenceOptions) error {
		if f == nil {
			return errors.New("gpu.WithNoncePerGPU: nil function")
		}
		o.nonceFor = f
		return nil
	}
}

// WithLookPath finds nvattest with f instead of exec.LookPath; for
// tests.
func WithLookPath(f func(string) (string, error)) EvidenceOption {
	return func(o *evidenceOptions) error { o.lookPath = f; return nil }
}

// maxNVAttestOutput bounds what nvattest may print (its evidence for 8
// GPUs is about 100 KiB).
const maxNVAttestOutput = 8 << 20

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

// checkCollected parses what a GPU returned (not a verification: that
// is the verifier's) so that a garbled answer is a reason at collection.
func checkCollected(it *gpuevidence.Item, nonce gpuevidence.Nonce) error {
	raw, err := base64.StdEncoding.DecodeString(it.Evidence)
	if err != nil {
		return err
	}
	rep, err := gpuevidence.ParseAttestationReport(raw)
	if err != nil {
		return err
	}
	if rep.Request.Nonce != nonce {
		return fmt.Errorf("the report signs nonce %x, not the one asked for", rep.Request.Nonce)
	}
	return nil
}

// nvattestOutput is what nvattest collect-evidence --format json prints.
type nvattestOutput struct {
	ResultCode    int                `json:"result_code"`
	ResultMessage string             `json:"result_message"`
	Evidences     []gpuevidence.Item `json:"evidences"`
}

// nvattest collects the evidence of GPU index with NVIDIA's nvattest
// (every GPU answers; the index-th item is this GPU's).
func (o *evidenceOptions) nvattest(ctx context.Context, index int, nonce gpuevidence.Nonce) (*gpuevidence.Item, error) {
	path, err := o.lookPath(NVAttest)
	if err != nil {
		return nil, errors.New("nvattest not installed")
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "collect-evidence", "--gpu-evidence-source", "corelib", "--gpu-architecture", "blackwell",
		"--nonce", hex.EncodeToString(nonce[:]), "--format", "json")
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxNVAttestOutput, 4096
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("nvattest collect-evidence: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if stdout.over {
		return nil, fmt.Errorf("nvattest collect-evidence: more than %d bytes of output", maxNVAttestOutput)
	}
	var res nvattestOutput
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("nvattest collect-evidence: output is not its JSON: %v", err)
	}
	if res.ResultCode != 0 {
		return nil, fmt.Errorf("nvattest collect-evidence: %s (code %d)", res.ResultMessage, res.ResultCode)
	}
	if index >= len(res.Evidences) {
		return nil, fmt.Errorf("nvattest collect-evidence: %d GPUs answered, none for GPU %d", len(res.Evidences), index)
	}
	it := res.Evidences[index]
	return &it, checkCollected(&it, nonce)
}

// limitedBuffer keeps at most max bytes and notes that more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
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
