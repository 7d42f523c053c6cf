//go:build linux && cgo

package gpu

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
)

func noNVAttest(string) (string, error) { return "", errors.New("not found") }

// TestCollectEvidenceUnattested: without confidential computing a
// Hopper is unattested, an A100 has no device attestation at all, and a
// Blackwell without nvattest says so; the verifier shows each as
// unattested with its reason.
func TestCollectEvidenceUnattested(t *testing.T) {
	t.Parallel()
	n := gpuevidence.RunNonce("run", nil)
	for _, tc := range []struct {
		spec      string
		blackwell bool
		want      string
	}{
		{"h100:2", false, "NVIDIA H100 80GB HBM3 not in CC mode (confidential computing and protected PCIe are off)"},
		{"a100", false, "NVIDIA A100-SXM4-40GB: no device attestation (Ampere)"},
		{"h200", true, "nvattest not installed"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			t.Parallel()
			s, err := Simulate(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			var src Source = s
			if tc.blackwell {
				// A simulated source never runs nvattest: serve the
				// device as a real one's.
				s.Device(0).GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) { return nvml.DEVICE_ARCH_BLACKWELL, nvml.SUCCESS }
				src = realLike{s}
			}
			got, err := CollectEvidence(t.Context(), src, n, WithLookPath(noNVAttest))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != s.Count() {
				t.Fatalf("%d entries for %d GPUs", len(got), s.Count())
			}
			for i, c := range got {
				if c.Evidence != nil || !strings.Contains(c.Reason, tc.want) || c.UUID == "" || c.Index != i {
					t.Errorf("GPU %d: %+v, want unattested with %q", i, c, tc.want)
				}
			}
			v, err := gpuevidence.New()
			if err != nil {
				t.Fatal(err)
			}
			rep := v.VerifyCollected(t.Context(), got, func(gpuevidence.Collected) gpuevidence.Nonce { return n })
			if rep.Count(gpuevidence.StatusUnattested) != len(got) || rep.Err() != nil || rep.GPUs[0].Label != got[0].UUID {
				t.Errorf("verified: %s %v", rep.Summary(), rep.Err())
			}
		})
	}
}

// TestCollectEvidenceSimulatedCC: simulated Hoppers under a test PKI
// sign each its own nonce through NVML's attestation calls; the evidence
// verifies, measurements matched, under that PKI's roots only.
func TestCollectEvidenceSimulatedCC(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Hour)
	ca, err := gpuevidencetest.NewCA(t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Save(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := gpuevidencetest.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Simulate("h100:2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EnableEvidence(loaded); err != nil {
		t.Fatal(err)
	}
	dispatch := "sha256:" + strings.Repeat("a", 64)
	nonceFor := func(uuid string) gpuevidence.Nonce { return gpuevidence.FleetNonce(dispatch, "job-1", uuid) }
	got, err := CollectEvidence(t.Context(), s, gpuevidence.Nonce{}, WithNoncePerGPU(nonceFor), WithLookPath(noNVAttest))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		if c.Evidence == nil || c.Source != gpuevidence.SourceSimulated {
			t.Fatalf("GPU %d: %+v, want simulated evidence", c.Index, c)
		}
	}
	// The RIMs of the simulated firmware (the same versions as the GPUs').
	ref, err := ca.NewGPU(gpuevidencetest.GPUOptions{DriverVersion: "550.54.15", VBIOSVersion: simModels["h100"].vbios})
	if err != nil {
		t.Fatal(err)
	}
	rims, err := ca.RIMs(ref, ca.RIMSigner)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(opts ...gpuevidence.Option) *gpuevidence.Report {
		v, err := gpuevidence.New(opts...)
		if err != nil {
			t.Fatal(err)
		}
		return v.VerifyCollected(t.Context(), got, func(c gpuevidence.Collected) gpuevidence.Nonce { return nonceFor(c.UUID) })
	}
	rep := verify(gpuevidence.WithDeviceRoot(ca.DeviceRoot.Cert, "test"), gpuevidence.WithRIMRoot(ca.RIMRoot.Cert, "test"), gpuevidence.WithCollateral(&gpuevidence.Collateral{RIMs: rims}))
	if rep.Count(gpuevidence.StatusMatched) != 2 {
		t.Fatalf("%s: %v", rep.Summary(), rep.Err())
	}
	for _, g := range rep.GPUs {
		if g.NVIDIARoot {
			t.Errorf("%s: simulated evidence reported NVIDIA-rooted", g.Label)
		}
	}
	if rep := verify(); rep.Count(gpuevidence.StatusFailed) != 2 {
		t.Errorf("under NVIDIA's root: %s, want 2 failed", rep.Summary())
	}
	// Another GPU's nonce: each GPU's evidence answers its own.
	swapped := []gpuevidence.Collected{got[1], got[0]}
	swapped[0].UUID, swapped[1].UUID = got[0].UUID, got[1].UUID
	v, err := gpuevidence.New(gpuevidence.WithDeviceRoot(ca.DeviceRoot.Cert, "test"))
	if err != nil {
		t.Fatal(err)
	}
	if rep := v.VerifyCollected(t.Context(), swapped, func(c gpuevidence.Collected) gpuevidence.Nonce { return nonceFor(c.UUID) }); rep.Count(gpuevidence.StatusFailed) != 2 {
		t.Errorf("evidence swapped between GPUs: %s, want 2 failed", rep.Summary())
	}
}

// TestCollectEvidenceNVAttest: a Blackwell with CC off gets its evidence
// from nvattest on the PATH (here a stand-in printing what nvattest
// prints), the GPU's item by its index.
func TestCollectEvidenceNVAttest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := gpuevidencetest.NewCA(time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	n := gpuevidence.RunNonce("run", []string{"sha256:aa"})
	var items []gpuevidence.Item
	for range 2 {
		g, err := ca.NewGPU(gpuevidencetest.GPUOptions{Arch: gpuevidence.ArchBlackwell})
		if err != nil {
			t.Fatal(err)
		}
		it, err := g.Evidence(n)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	out, err := json.Marshal(nvattestOutput{ResultCode: 0, ResultMessage: "Ok", Evidences: items})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, NVAttest)
	body := "#!/bin/sh\n" +
		`[ "$1 $2 $3 $4 $5 $6 $7" = "collect-evidence --gpu-evidence-source corelib --gpu-architecture blackwell --nonce ` + n.String() + `" ] || { echo "unexpected arguments: $*" >&2; exit 2; }` + "\n" +
		"cat " + filepath.Join(dir, "out.json") + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Simulate("h200:2")
	if err != nil {
		t.Fatal(err)
	}
	s.Device(1).GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) { return nvml.DEVICE_ARCH_BLACKWELL, nvml.SUCCESS }
	got, err := CollectEvidence(t.Context(), s, n, WithLookPath(func(string) (string, error) { return script, nil }))
	if err != nil {
		t.Fatal(err)
	}
	// A simulated source never runs nvattest: simulated GPUs sign under
	// the test PKI only. Serve the same devices as if real.
	if got[1].Evidence != nil {
		t.Fatalf("a simulated Blackwell got evidence from nvattest: %+v", got[1])
	}
	real := realLike{s}
	got, err = CollectEvidence(t.Context(), real, n, WithLookPath(func(string) (string, error) { return script, nil }))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Evidence != nil || !strings.Contains(got[0].Reason, "not in CC mode") {
		t.Errorf("GPU 0 (Hopper, CC off): %+v", got[0])
	}
	if got[1].Source != gpuevidence.SourceNVAttest || got[1].Evidence == nil || got[1].Evidence.Evidence != items[1].Evidence {
		t.Fatalf("GPU 1 (Blackwell): %+v, want nvattest's second item", got[1])
	}
	v, err := gpuevidence.New(gpuevidence.WithDeviceRoot(ca.DeviceRoot.Cert, "test"))
	if err != nil {
		t.Fatal(err)
	}
	rep := v.VerifyCollected(t.Context(), got, func(gpuevidence.Collected) gpuevidence.Nonce { return n })
	if rep.GPUs[0].Status != gpuevidence.StatusUnattested || rep.GPUs[1].Status != gpuevidence.StatusNotChecked {
		t.Errorf("%s: %v", rep.Summary(), rep.Err())
	}
	// nvattest failing is the GPU's reason.
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'no GPU found' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err = CollectEvidence(t.Context(), real, n, WithLookPath(func(string) (string, error) { return script, nil }))
	if err != nil {
		t.Fatal(err)
	}
	if got[1].Evidence != nil || !strings.Contains(got[1].Reason, "nvattest collect-evidence: exit status 1: no GPU found") {
		t.Errorf("nvattest failing: %+v", got[1])
	}
}

// realLike serves a simulated source's devices as a real one's.
type realLike struct{ sim *Simulated }

func (r realLike) Open() (nvml.Interface, func(), error) { return r.sim.Open() }
func (realLike) Simulated() bool                         { return false }
func (realLike) String() string                          { return "real-like" }
