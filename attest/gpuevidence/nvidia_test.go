package gpuevidence

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"
)

// NVIDIA's published evidence and RIMs (testdata/nvidia: NVIDIA's
// attestation-sdk, testdata/nvtrust: NVIDIA's nvtrust; Apache-2.0, their
// LICENSE files beside them). Each must get the verdict its name says.

const nvidiaGPU = nvidiaUnit + "sample_attestation_data/gpu/"

func hexNonce(t testing.TB, s string) Nonce {
	t.Helper()
	var n Nonce
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(n) {
		t.Fatalf("nonce %q: %v", s, err)
	}
	copy(n[:], b)
	return n
}

// txtItem builds a serialized item from NVIDIA's hex report and PEM
// chain files.
func txtItem(t testing.TB, arch Arch, report, chain string) Item {
	t.Helper()
	c, err := os.ReadFile(chain)
	if err != nil {
		t.Fatal(err)
	}
	return Item{Arch: arch, Evidence: base64.StdEncoding.EncodeToString(readHexReport(t, report)), Certificate: base64.StdEncoding.EncodeToString(c)}
}

func readItems(t testing.TB, path string) []Item {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	items, err := ParseFile(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// The nonces NVIDIA's tests collected their evidence with.
const (
	nonceSerialized = "e97b23a1718095a0e9e35edca810768c70a6a5a389b705e753b197912bc11576"
	nonceUnit       = "5bb22e377702d4e1e8215a903ba094826b9ac7f731dee1fe8102958bf2840aca"
	nonceSample     = "27a328247bf7935c993341cf587be6f05986ccce4fe7ba2c54100bd616a58f66"
	nonceScenario   = "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"
)

// rimAt is when NVIDIA's sample RIMs were all current (the expired
// driver RIM's signer is valid on 2025-01-01 only).
var rimAt = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func nvidiaCollateral(t testing.TB) *Collateral {
	t.Helper()
	c := &Collateral{RIMs: map[string][]byte{}}
	for id, f := range map[string]string{
		"NV_GPU_DRIVER_GH100_570.124.03":        nvidiaUnit + "sample_rims/NV_GPU_DRIVER_GH100_570.124.03_expired.xml",
		"NV_GPU_DRIVER_GH100_535.86.09":         nvidiaUnit + "sample_rims/NV_GPU_DRIVER_GH100_535.86.09_measurement_mismatch.xml",
		"NV_GPU_VBIOS_1010_0200_882_96005E0001": nvidiaUnit + "sample_rims/NV_GPU_VBIOS_1010_0200_882_96005E0001_measurement_mismatch.xml",
		"NV_GPU_VBIOS_1010_0205_862_96005E0004": "testdata/nvtrust/1010_0205_862_96005E0004_PROD.swidtag",
	} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c.RIMs[id] = b
	}
	return c
}

// TestNVIDIAEvidence verifies each of NVIDIA's GPU vectors under the
// pinned root and checks its verdict and what it names.
func TestNVIDIAEvidence(t *testing.T) {
	t.Parallel()
	multi := readItems(t, "testdata/nvidia/serialized_test_evidence/multi_gpu_hopper.json")
	tests := []struct {
		name       string
		items      []Item
		nonce      string
		collateral bool
		at         time.Time
		// want is each GPU's status; wantText strings its problems or
		// reason must hold.
		want     []Status
		wantText []string
		model    string
		driver   string
		vbios    string
		ueid     string
	}{
		{
			name:  "hopper_evidence.json: one device-signed Hopper",
			items: readItems(t, "testdata/nvidia/serialized_test_evidence/hopper_evidence.json"), nonce: nonceSerialized,
			want: []Status{StatusNotChecked}, wantText: []string{"NV_GPU_DRIVER_GH100_590.12", "NV_GPU_VBIOS_G520_0200_885_9600A50001"},
			model: "GH100 A01 GSP BROM", driver: "590.12", vbios: "96.00.A5.00.01",
		},
		{
			name:  "multi_gpu_hopper.json: four device-signed Hoppers",
			items: multi, nonce: nonceSerialized,
			want:  []Status{StatusNotChecked, StatusNotChecked, StatusNotChecked, StatusNotChecked},
			model: "GH100 A01 GSP BROM", driver: "590.12",
		},
		{
			name:  "evidence_hopper_590_12.json: one device-signed Hopper",
			items: readItems(t, nvidiaUnit+"evidence_hopper_590_12.json"), nonce: nonceSerialized,
			want: []Status{StatusNotChecked},
		},
		{
			name:  "hopperAttestationReport: a device-signed Hopper",
			items: []Item{txtItem(t, ArchHopper, nvidiaUnit+"hopperAttestationReport.txt", nvidiaUnit+"hopperCertChain.txt")}, nonce: nonceUnit,
			want:  []Status{StatusNotChecked},
			model: "GH100 A01 GSP BROM", driver: "580.159.03", vbios: "96.00.74.00.20", ueid: "509096176156678437554566035365892618958504054724",
		},
		{
			name:  "blackwellAttestationReport: a device-signed Blackwell",
			items: []Item{txtItem(t, ArchBlackwell, nvidiaGPU+"blackwellAttestationReport.txt", nvidiaGPU+"blackwellCertChain.txt")}, nonce: nonceScenario,
			want: []Status{StatusNotChecked}, wantText: []string{"NV_GPU_CC_DRIVER_GB100_575.32"},
			model: "GB100 A01 GSP BROM", driver: "575.32", vbios: "97.00.88.00.0F", ueid: "474146966256510137525212816567191319424869109849",
		},
		{
			name:  "hopperAttestationReportInvalidSignature: refused, the signature",
			items: []Item{txtItem(t, ArchHopper, nvidiaGPU+"hopperAttestationReportInvalidSignature.txt", nvidiaGPU+"hopperCertChainExpired.txt")}, nonce: nonceScenario,
			want: []Status{StatusFailed}, wantText: []string{"report signature", "does not verify"},
		},
		{
			// NVIDIA's verifier passes a report without an FWID; gpuattest
			// refuses it. This report (driver 535) predates the FWID field.
			name:  "sample hopperAttestationReport: refused, no FWID",
			items: []Item{txtItem(t, ArchHopper, nvidiaGPU+"hopperAttestationReport.txt", nvidiaGPU+"hopperCertChain.txt")}, nonce: nonceSample,
			want: []Status{StatusFailed}, wantText: []string{"no FWID"},
		},
		{
			name:  "sample hopperAttestationReport with the _measurement_mismatch RIMs: the mismatches named",
			items: []Item{txtItem(t, ArchHopper, nvidiaGPU+"hopperAttestationReport.txt", nvidiaGPU+"hopperCertChain.txt")}, nonce: nonceSample,
			collateral: true, at: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC),
			want: []Status{StatusFailed}, wantText: []string{
				"no FWID",
				// The driver RIM was edited to make the mismatch: its
				// signature no longer covers it.
				"RIM NV_GPU_DRIVER_GH100_535.86.09: the document does not match its signed digest",
				"measurement 9 (vbios RIM NV_GPU_VBIOS_1010_0200_882_96005E0001): the report has",
			},
		},
		{
			name:  "hopperAttestationReportExpired, judged after its driver RIM expired: refused, expired",
			items: []Item{txtItem(t, ArchHopper, nvidiaGPU+"hopperAttestationReportExpired.txt", nvidiaGPU+"hopperCertChainExpired.txt")}, nonce: nonceScenario,
			collateral: true, at: time.Date(2025, 1, 3, 0, 0, 0, 0, time.UTC),
			want: []Status{StatusFailed}, wantText: []string{"RIM NV_GPU_DRIVER_GH100_570.124.03: certificate chain", "expired", "changed after signing"},
			driver: "570.124.03", vbios: "96.00.5E.00.04",
		},
		{
			name:  "hopperAttestationReportExpired without collateral: device-signed",
			items: []Item{txtItem(t, ArchHopper, nvidiaGPU+"hopperAttestationReportExpired.txt", nvidiaGPU+"hopperCertChainExpired.txt")}, nonce: nonceScenario,
			want: []Status{StatusNotChecked}, wantText: []string{"no RIMs given"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := []Option{}
			if tc.collateral {
				opts = append(opts, WithCollateral(nvidiaCollateral(t)))
			}
			if !tc.at.IsZero() {
				opts = append(opts, WithTime(tc.at))
			}
			v, err := New(opts...)
			if err != nil {
				t.Fatal(err)
			}
			rep := v.VerifyItems(t.Context(), tc.items, hexNonce(t, tc.nonce))
			if len(rep.GPUs) != len(tc.want) {
				t.Fatalf("%d GPUs, want %d", len(rep.GPUs), len(tc.want))
			}
			ueids := map[string]bool{}
			for i, g := range rep.GPUs {
				text := g.Reason + " " + strings.Join(g.Problems, " ")
				if g.Status != tc.want[i] {
					t.Errorf("GPU %d: status %s (%s), want %s", i, g.Status, text, tc.want[i])
				}
				for _, w := range tc.wantText {
					if !strings.Contains(text, w) {
						t.Errorf("GPU %d: %q does not say %q", i, text, w)
					}
				}
				if g.Status == StatusFailed && !strings.Contains(rep.Err().Error(), g.Label+": ") {
					t.Errorf("Err() = %v, does not name %s", rep.Err(), g.Label)
				}
				if !g.NVIDIARoot {
					t.Errorf("GPU %d: not NVIDIA-rooted under the pinned root", i)
				}
				for _, f := range []struct{ name, got, want string }{
					{"model", g.Model, tc.model}, {"driver", g.DriverVersion, tc.driver},
					{"vbios", g.VBIOSVersion, tc.vbios}, {"ueid", g.UEID, tc.ueid},
				} {
					if f.want != "" && f.got != f.want {
						t.Errorf("GPU %d: %s %q, want %q", i, f.name, f.got, f.want)
					}
				}
				if g.Status.DeviceSigned() && (g.FWID == "" || g.Nonce != tc.nonce) {
					t.Errorf("GPU %d: device-signed with FWID %q and nonce %q", i, g.FWID, g.Nonce)
				}
				ueids[g.UEID] = true
			}
			if len(ueids) != len(rep.GPUs) {
				t.Errorf("%d GPUs but %d distinct device identities", len(rep.GPUs), len(ueids))
			}
			if (rep.Err() == nil) != (rep.Count(StatusFailed) == 0) {
				t.Errorf("Err() = %v with %d failed GPUs", rep.Err(), rep.Count(StatusFailed))
			}
		})
	}
}

// TestNVIDIAMultiGPUSummary: the multi-GPU file yields 4 device-signed
// GPUs, and says so.
func TestNVIDIAMultiGPUSummary(t *testing.T) {
	t.Parallel()
	v, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rep := v.VerifyItems(t.Context(), readItems(t, "testdata/nvidia/serialized_test_evidence/multi_gpu_hopper.json"), hexNonce(t, nonceSerialized))
	if got, want := rep.Summary(), "4/4 device-signed (0 measurements matched, 4 not checked)"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

// TestNVIDIARIMs checks NVIDIA's RIM files on their own: the signature
// (C14N 1.1, reproduced byte for byte) and the chain to the pinned RIM
// root, as of a time each was current.
func TestNVIDIARIMs(t *testing.T) {
	t.Parallel()
	// NVIDIA's "incorrect RIM root" is a RIM signer's certificate, not a
	// CA: LoadRoot refuses it, so it is read as it is.
	if _, err := LoadRoot(nvidiaUnit + "incorrect_rim_root.crt"); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Errorf("LoadRoot(incorrect_rim_root.crt) = %v, want a not-a-CA error", err)
	}
	pb, err := os.ReadFile(nvidiaUnit + "incorrect_rim_root.crt")
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(pb)
	wrongRoot, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file    string
		at      time.Time
		version string
		// want is what the errors say; empty for none.
		want []string
	}{
		{file: nvidiaUnit + "NV_GPU_DRIVER_GH100_550.144.03.xml", at: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), version: "550.144.03"},
		{file: "testdata/nvtrust/1010_0205_862_96005E0004_PROD.swidtag", at: rimAt, version: "96.00.5E.00.04"},
		{file: "testdata/nvtrust/1010_0200_882_96005E0001_PROD.swidtag", at: rimAt, version: "96.00.5E.00.01"},
		{file: nvidiaUnit + "sample_rims/NV_GPU_VBIOS_1010_0200_882_96005E0001_measurement_mismatch.xml", at: rimAt, version: "96.00.5E.00.01"},
		{file: nvidiaUnit + "incorrect_signature_driver_rim.xml", at: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), want: []string{"signature by", "does not verify"}},
		{file: nvidiaUnit + "sample_rims/NV_GPU_DRIVER_GH100_535.86.09_measurement_mismatch.xml", at: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), want: []string{"does not match its signed digest"}},
		{file: nvidiaUnit + "sample_rims/NV_GPU_DRIVER_GH100_570.124.03_expired.xml", at: time.Date(2025, 1, 3, 0, 0, 0, 0, time.UTC), want: []string{"expired", "does not match its signed digest"}},
		{file: nvidiaUnit + "incorrect_cert_chain_driver_rim.xml", at: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC), want: []string{"certificate chain"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			r, err := ParseRIM("rim", b)
			if err != nil {
				t.Fatal(err)
			}
			errs := r.Verify(NVIDIARIMRoot(), tc.at)
			var text []string
			for _, e := range errs {
				text = append(text, e.Error())
			}
			all := strings.Join(text, "\n")
			if len(tc.want) == 0 && len(errs) > 0 {
				t.Errorf("Verify = %s, want no error", all)
			}
			if len(tc.want) > 0 && len(errs) == 0 {
				t.Errorf("Verify passed, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("Verify = %s, does not say %q", all, w)
				}
			}
			if tc.version != "" && r.Version != tc.version {
				t.Errorf("version %q, want %q", r.Version, tc.version)
			}
			if len(errs) == 0 {
				// The same RIM under another root fails.
				errs := r.Verify(wrongRoot, tc.at)
				if len(errs) == 0 || !strings.Contains(errs[0].Error(), "does not verify to") {
					t.Errorf("under incorrect_rim_root.crt: %v, want a chain error", errs)
				}
			}
		})
	}
}
