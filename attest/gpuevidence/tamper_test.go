package gpuevidence_test

import (
	"encoding/base64"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
)

// t0 is when the simulated PKIs start; tests judge evidence a day later.
var (
	t0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	at = t0.Add(24 * time.Hour)
)

type sim struct {
	ca  *gpuevidencetest.CA
	gpu *gpuevidencetest.GPU
}

func newSim(t testing.TB, opts gpuevidencetest.GPUOptions) sim {
	t.Helper()
	ca, err := gpuevidencetest.NewCA(t0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ca.NewGPU(opts)
	if err != nil {
		t.Fatal(err)
	}
	return sim{ca, g}
}

func (s sim) item(t testing.TB, n gpuevidence.Nonce) gpuevidence.Item {
	t.Helper()
	it, err := s.gpu.Evidence(n)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func (s sim) rims(t testing.TB) map[string][]byte {
	t.Helper()
	r, err := s.ca.RIMs(s.gpu, s.ca.RIMSigner)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (s sim) verifier(t testing.TB, c *gpuevidence.Collateral, when time.Time) *gpuevidence.Verifier {
	t.Helper()
	opts := []gpuevidence.Option{
		gpuevidence.WithDeviceRoot(s.ca.DeviceRoot.Cert, "test root"),
		gpuevidence.WithRIMRoot(s.ca.RIMRoot.Cert, "test RIM root"),
		gpuevidence.WithTime(when),
	}
	if c != nil {
		opts = append(opts, gpuevidence.WithCollateral(c))
	}
	v, err := gpuevidence.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// verifyOne verifies one claim labelled with the GPU's name and returns
// its verdict.
func verifyOne(t testing.TB, v *gpuevidence.Verifier, it gpuevidence.Item, n gpuevidence.Nonce, label string) gpuevidence.GPU {
	t.Helper()
	rep := v.Verify(t.Context(), []gpuevidence.Claim{{Item: it, Nonce: n, Label: label}})
	return rep.GPUs[0]
}

func wantFailed(t *testing.T, g gpuevidence.GPU, label string, says ...string) {
	t.Helper()
	measurements := false
	for _, s := range says {
		measurements = measurements || strings.Contains(s, "measurement") || strings.Contains(s, "RIM") || strings.Contains(s, "expired") || strings.Contains(s, "signed digest")
	}
	if g.DeviceSigned != measurements {
		t.Errorf("device_signed %v for a failure of the %s", g.DeviceSigned, map[bool]string{true: "measurements", false: "device"}[measurements])
	}
	if g.Status != gpuevidence.StatusFailed {
		t.Fatalf("status %s (%s), want failed", g.Status, g.Reason)
	}
	if g.Label != label {
		t.Errorf("label %q, want %q", g.Label, label)
	}
	text := strings.Join(g.Problems, "\n")
	for _, s := range says {
		if !strings.Contains(text, s) {
			t.Errorf("problems:\n%s\ndo not say %q", text, s)
		}
	}
}

// TestSimulatedMatched: a simulated GPU with its RIMs verifies as
// device-signed, measurements matched, under the test roots only, and is
// never NVIDIA-rooted.
func TestSimulatedMatched(t *testing.T) {
	t.Parallel()
	for _, arch := range []gpuevidence.Arch{gpuevidence.ArchHopper, gpuevidence.ArchBlackwell} {
		t.Run(string(arch), func(t *testing.T) {
			t.Parallel()
			s := newSim(t, gpuevidencetest.GPUOptions{Arch: arch})
			n := gpuevidence.RunNonce("run-1", []string{"sha256:aa", "sha256:bb"})
			g := verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: s.rims(t)}, at), s.item(t, n), n, "GPU-sim-0")
			if g.Status != gpuevidence.StatusMatched {
				t.Fatalf("status %s %v %s, want matched", g.Status, g.Problems, g.Reason)
			}
			if g.NVIDIARoot {
				t.Error("a simulated GPU reported as NVIDIA-rooted")
			}
			if !strings.Contains(g.Model, gpuevidencetest.Simulated) {
				t.Errorf("model %q does not say %s", g.Model, gpuevidencetest.Simulated)
			}
			var matched int
			for _, r := range g.RIMs {
				matched += r.Matched
			}
			if want := len(gpuevidencetest.VBIOSIndexes) + len(gpuevidencetest.DriverIndexes) - 1; matched != want {
				t.Errorf("%d measurements matched, want %d (all but index 35, NVDEC0 disabled)", matched, want)
			}
			// Without RIMs the same evidence is device-signed, not checked.
			g = verifyOne(t, s.verifier(t, nil, at), s.item(t, n), n, "GPU-sim-0")
			if g.Status != gpuevidence.StatusNotChecked || !strings.Contains(g.Reason, "no RIMs given") {
				t.Errorf("without RIMs: %s %q, want not-checked", g.Status, g.Reason)
			}
		})
	}
}

// TestTamper is acceptance 2: each tampering fails, naming the GPU.
func TestTamper(t *testing.T) {
	t.Parallel()
	dispatch := "sha256:" + strings.Repeat("d", 64)
	const job, uuid = "a100-3", "GPU-5f3c0e0a-0000-4000-8000-000000000003"
	right := gpuevidence.FleetNonce(dispatch, job, uuid)

	t.Run("nonce of another dispatch", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		it := s.item(t, gpuevidence.FleetNonce("sha256:"+strings.Repeat("e", 64), job, uuid))
		wantFailed(t, verifyOne(t, s.verifier(t, nil, at), it, right, uuid), uuid, "nonce: the report signs", "another dispatch, job or run")
	})
	t.Run("nonce of another job", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		it := s.item(t, gpuevidence.FleetNonce(dispatch, "a100-4", uuid))
		wantFailed(t, verifyOne(t, s.verifier(t, nil, at), it, right, uuid), uuid, "nonce: the report signs")
	})
	t.Run("nonce of another GPU", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		it := s.item(t, gpuevidence.FleetNonce(dispatch, job, "GPU-other"))
		wantFailed(t, verifyOne(t, s.verifier(t, nil, at), it, right, uuid), uuid, "nonce: the report signs")
	})
	t.Run("one flipped byte in the signed region", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		it := s.item(t, right)
		raw, _ := base64.StdEncoding.DecodeString(it.Evidence)
		// The request's nonce, a measurement value, the responder's
		// nonce and the opaque data's driver version.
		for _, off := range []int{10, 37 + 8 + 20, len(raw) - 96 - 40, len(raw) - 96 - 3} {
			b := append([]byte(nil), raw...)
			b[off] ^= 0x01
			bad := it
			bad.Evidence = base64.StdEncoding.EncodeToString(b)
			bad.Nonce = ""
			g := verifyOne(t, s.verifier(t, nil, at), bad, right, uuid)
			wantFailed(t, g, uuid, "report signature by the device leaf")
		}
	})
	t.Run("a chain to another root", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		other := newSim(t, gpuevidencetest.GPUOptions{})
		it := s.item(t, right)
		wantFailed(t, verifyOne(t, other.verifier(t, nil, at), it, right, uuid), uuid, "does not verify to")
		// Under NVIDIA's pinned root, the default, a simulated GPU never
		// passes.
		v, err := gpuevidence.New(gpuevidence.WithTime(at))
		if err != nil {
			t.Fatal(err)
		}
		wantFailed(t, verifyOne(t, v, it, right, uuid), uuid, `does not verify to "NVIDIA Device Identity CA"`)
	})
	t.Run("a foreign BROM under a cached provisioner", func(t *testing.T) {
		t.Parallel()
		// GPU a's chain verifies and its upper part is cached; b's leaf
		// and BROM come from another PKI, sent with a's upper part.
		a := newSim(t, gpuevidencetest.GPUOptions{})
		b := newSim(t, gpuevidencetest.GPUOptions{})
		forged := *b.gpu
		forged.Chain = gpuevidencetest.PEM(b.gpu.Leaf.Cert, b.gpu.BROM.Cert, a.ca.Provisioner.Cert, a.ca.Identity.Cert, a.ca.DeviceRoot.Cert)
		fit, err := forged.Evidence(right)
		if err != nil {
			t.Fatal(err)
		}
		v, err := gpuevidence.New(gpuevidence.WithDeviceRoot(a.ca.DeviceRoot.Cert, "test"), gpuevidence.WithTime(at), gpuevidence.WithWorkers(1))
		if err != nil {
			t.Fatal(err)
		}
		rep := v.Verify(t.Context(), []gpuevidence.Claim{{Item: a.item(t, right), Nonce: right, Label: "a"}, {Item: fit, Nonce: right, Label: uuid}})
		if rep.GPUs[0].Status != gpuevidence.StatusNotChecked {
			t.Fatalf("a: %s %v", rep.GPUs[0].Status, rep.GPUs[0].Problems)
		}
		wantFailed(t, rep.GPUs[1], uuid, "does not verify to")
	})
	t.Run("an FWID removed", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{NoFWID: true})
		wantFailed(t, verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: s.rims(t)}, at), s.item(t, right), right, uuid), uuid, "no FWID")
	})
	t.Run("an FWID other than the leaf's", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		s.gpu.FWID = append([]byte(nil), s.gpu.FWID...)
		s.gpu.FWID[0] ^= 1
		wantFailed(t, verifyOne(t, s.verifier(t, nil, at), s.item(t, right), right, uuid), uuid, "FWID: the report says")
	})
	t.Run("a measurement changed against its RIM", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		rims := s.rims(t)
		s.gpu.Measurements[20] = make([]byte, 48)
		wantFailed(t, verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: rims}, at), s.item(t, right), right, uuid), uuid,
			"measurement 20 (driver RIM NV_GPU_DRIVER_GH100_570.124.03): the report has 000000", "the RIM expects one of")
	})
	t.Run("an expired RIM, judged after and before its expiry", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		signer, err := s.ca.NewRIMSigner(t0, t0.Add(48*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		rims, err := s.ca.RIMs(s.gpu, signer)
		if err != nil {
			t.Fatal(err)
		}
		it := s.item(t, right)
		c := &gpuevidence.Collateral{RIMs: rims}
		after := verifyOne(t, s.verifier(t, c, t0.Add(72*time.Hour)), it, right, uuid)
		wantFailed(t, after, uuid, "expired")
		before := verifyOne(t, s.verifier(t, c, t0.Add(24*time.Hour)), it, right, uuid)
		if before.Status != gpuevidence.StatusMatched {
			t.Errorf("judged before the expiry: %s %v, want matched", before.Status, before.Problems)
		}
		for _, r := range before.RIMs {
			if r.ValidUntil == nil || !r.ValidUntil.Equal(t0.Add(48*time.Hour)) {
				t.Errorf("RIM %s valid until %v, want %v", r.ID, r.ValidUntil, t0.Add(48*time.Hour))
			}
		}
	})
	t.Run("a RIM edited after signing", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		rims := s.rims(t)
		for id, b := range rims {
			if strings.Contains(id, "DRIVER") {
				rims[id] = []byte(strings.Replace(string(b), `index="20"`, `index="20" `, 1))
				rims[id] = []byte(strings.Replace(string(rims[id]), `name="Measurement_21"`, `name="Measurement_XX"`, 1))
			}
		}
		wantFailed(t, verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: rims}, at), s.item(t, right), right, uuid), uuid, "does not match its signed digest")
	})
}

// TestMeasurementRules: index 35 is compared only when NVDEC0 is
// enabled; the driver and VBIOS RIMs must cover disjoint indexes; a RIM
// for another version than the report's fails.
func TestMeasurementRules(t *testing.T) {
	t.Parallel()
	n := gpuevidence.RunNonce("run", nil)
	t.Run("NVDEC0 enabled: index 35 compared", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{NVDEC0Enabled: true})
		rims := s.rims(t)
		s.gpu.Measurements[35] = make([]byte, 48)
		wantFailed(t, verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: rims}, at), s.item(t, n), n, "g"), "g", "measurement 35")
	})
	t.Run("NVDEC0 disabled: index 35 skipped", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		rims := s.rims(t)
		s.gpu.Measurements[35] = make([]byte, 48)
		g := verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: rims}, at), s.item(t, n), n, "g")
		if g.Status != gpuevidence.StatusMatched {
			t.Fatalf("%s %v, want matched", g.Status, g.Problems)
		}
		if r := g.RIMs[0]; r.Kind != "driver" || len(r.Skipped) != 1 || r.Skipped[0] != 35 {
			t.Errorf("driver RIM skipped %v, want [35]", r.Skipped)
		}
	})
	t.Run("overlapping RIMs", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		it := s.item(t, n)
		_, vbiosID, err := gpuevidence.RIMIDs(it)
		if err != nil {
			t.Fatal(err)
		}
		rims := s.rims(t)
		ms := map[int][]byte{}
		for _, i := range append(gpuevidencetest.VBIOSIndexes, 20) {
			ms[i] = s.gpu.Measurements[i]
		}
		if rims[vbiosID], err = s.ca.RIM(vbiosID, s.gpu.Options.VBIOSVersion, ms, s.ca.RIMSigner); err != nil {
			t.Fatal(err)
		}
		wantFailed(t, verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: rims}, at), it, n, "g"), "g", "both claim measurement indexes [20]")
	})
	t.Run("a RIM of another version under the report's ID", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		it := s.item(t, n)
		driverID, _, err := gpuevidence.RIMIDs(it)
		if err != nil {
			t.Fatal(err)
		}
		rims := s.rims(t)
		ms := map[int][]byte{}
		for _, i := range gpuevidencetest.DriverIndexes {
			ms[i] = s.gpu.Measurements[i]
		}
		if rims[driverID], err = s.ca.RIM(driverID, "999.99", ms, s.ca.RIMSigner); err != nil {
			t.Fatal(err)
		}
		wantFailed(t, verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: rims}, at), it, n, "g"), "g", `driver RIM NV_GPU_DRIVER_GH100_570.124.03 is for version "999.99", the report says "570.124.03"`)
	})
	t.Run("one RIM missing", func(t *testing.T) {
		t.Parallel()
		s := newSim(t, gpuevidencetest.GPUOptions{})
		it := s.item(t, n)
		_, vbiosID, _ := gpuevidence.RIMIDs(it)
		rims := s.rims(t)
		delete(rims, vbiosID)
		g := verifyOne(t, s.verifier(t, &gpuevidence.Collateral{RIMs: rims}, at), it, n, "g")
		if g.Status != gpuevidence.StatusNotChecked || g.Reason != "vbios RIM "+vbiosID+" not in the collateral" {
			t.Errorf("%s %q, want not-checked naming the VBIOS RIM", g.Status, g.Reason)
		}
	})
}

// TestOCSPAsOfRecordedTime: stored OCSP answers are judged at the
// recorded time: good answers show, a revocation before that time fails,
// one after it does not, an answer not current then is not used.
func TestOCSPAsOfRecordedTime(t *testing.T) {
	t.Parallel()
	n := gpuevidence.RunNonce("run", nil)
	s := newSim(t, gpuevidencetest.GPUOptions{})
	it := s.item(t, n)
	ca, g := s.ca, s.gpu
	answer := func(cert gpuevidencetest.Issuer, issuer gpuevidencetest.Issuer, st gpuevidencetest.OCSPStatus, this time.Time, revoked time.Time) []byte {
		b, err := gpuevidencetest.OCSP(cert.Cert, issuer, st, this, this.Add(7*24*time.Hour), revoked)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := func(this time.Time) [][]byte {
		return [][]byte{
			answer(g.BROM, ca.Provisioner, gpuevidencetest.OCSPGood, this, time.Time{}),
			answer(ca.Provisioner, ca.Identity, gpuevidencetest.OCSPGood, this, time.Time{}),
			answer(ca.Identity, ca.DeviceRoot, gpuevidencetest.OCSPGood, this, time.Time{}),
		}
	}
	tests := []struct {
		name    string
		answers [][]byte
		want    gpuevidence.Revocation
		fail    string
	}{
		{"none", nil, gpuevidence.RevocationNotChecked, ""},
		{"all good", good(at.Add(-time.Hour)), gpuevidence.RevocationGood, ""},
		{"some", good(at.Add(-time.Hour))[:1], gpuevidence.RevocationPartial, ""},
		{"answers from after the recorded time say nothing of it", good(at.Add(30 * 24 * time.Hour)), gpuevidence.RevocationNotChecked, ""},
		{"revoked before", append(good(at.Add(-time.Hour))[1:], answer(g.BROM, ca.Provisioner, gpuevidencetest.OCSPRevoked, at.Add(-time.Hour), at.Add(-2*time.Hour))), "", "was revoked at"},
		{"revoked after", append(good(at.Add(-time.Hour))[1:], answer(g.BROM, ca.Provisioner, gpuevidencetest.OCSPRevoked, at.Add(-time.Hour), at.Add(time.Hour))), gpuevidence.RevocationGood, ""},
		{"unknown", append(good(at.Add(-time.Hour))[1:], answer(g.BROM, ca.Provisioner, gpuevidencetest.OCSPUnknown, at.Add(-time.Hour), time.Time{})), "", "OCSP answered unknown"},
		// An answer "signed" by a key that is not the issuer's is no answer.
		{"forged", append(good(at.Add(-time.Hour))[1:], answer(g.BROM, ca.Identity, gpuevidencetest.OCSPGood, at.Add(-time.Hour), time.Time{})), gpuevidence.RevocationPartial, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := verifyOne(t, s.verifier(t, &gpuevidence.Collateral{OCSP: tc.answers}, at), it, n, "GPU-x")
			if tc.fail != "" {
				wantFailed(t, got, "GPU-x", tc.fail)
				return
			}
			if got.Status != gpuevidence.StatusNotChecked || got.Revocation != tc.want {
				t.Errorf("%s revocation %q %v, want not-checked with %q", got.Status, got.Revocation, got.Problems, tc.want)
			}
		})
	}
}

// TestNVIDIAMultiGPUTampered: in NVIDIA's real multi-GPU file, another
// run's nonce fails every GPU, and one flipped byte in GPU 2's report
// fails GPU 2 alone, named.
func TestNVIDIAMultiGPUTampered(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/nvidia/serialized_test_evidence/multi_gpu_hopper.json")
	if err != nil {
		t.Fatal(err)
	}
	items, err := gpuevidence.ParseFile("multi_gpu_hopper.json", b)
	if err != nil {
		t.Fatal(err)
	}
	var n gpuevidence.Nonce
	nb, _ := hex.DecodeString("e97b23a1718095a0e9e35edca810768c70a6a5a389b705e753b197912bc11576")
	copy(n[:], nb)
	v, err := gpuevidence.New()
	if err != nil {
		t.Fatal(err)
	}
	other := gpuevidence.FleetNonce("sha256:0", "job", "")
	if rep := v.VerifyItems(t.Context(), items, other); rep.Count(gpuevidence.StatusFailed) != 4 {
		t.Errorf("another nonce: %s, want 4 failed", rep.Summary())
	}
	raw, _ := base64.StdEncoding.DecodeString(items[2].Evidence)
	raw[200] ^= 0x80
	tampered := append([]gpuevidence.Item(nil), items...)
	tampered[2].Evidence = base64.StdEncoding.EncodeToString(raw)
	rep := v.VerifyItems(t.Context(), tampered, n)
	if got := rep.Summary(); got != "3/4 device-signed (0 measurements matched, 3 not checked), 1 failed" {
		t.Errorf("Summary() = %q", got)
	}
	if err := rep.Err(); err == nil || !strings.HasPrefix(err.Error(), "GPU 2: GPU evidence failed: report signature") {
		t.Errorf("Err() = %v, want GPU 2's signature named", err)
	}
}
