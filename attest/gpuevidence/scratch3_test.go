package gpuevidence

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func txtItem(t *testing.T, arch Arch, rep, chain string) Item {
	r, _ := os.ReadFile(rep)
	c, _ := os.ReadFile(chain)
	b, err := hex.DecodeString(strings.TrimSpace(string(r)))
	if err != nil {
		t.Fatal(err)
	}
	return Item{Arch: arch, Evidence: base64.StdEncoding.EncodeToString(b), Certificate: base64.StdEncoding.EncodeToString(c)}
}

func TestScratchVerdicts(t *testing.T) {
	const g = "testdata/nvidia/unit-tests/sample_attestation_data/gpu/"
	col := &Collateral{RIMs: map[string][]byte{}}
	for id, f := range map[string]string{
		"NV_GPU_DRIVER_GH100_570.124.03":        "testdata/nvidia/unit-tests/sample_rims/NV_GPU_DRIVER_GH100_570.124.03_expired.xml",
		"NV_GPU_VBIOS_1010_0205_862_96005E0004": "testdata/nvtrust/1010_0205_862_96005E0004_PROD.swidtag",
		"NV_GPU_VBIOS_1010_0200_882_96005E0001": "testdata/nvtrust/1010_0200_882_96005E0001_PROD.swidtag",
	} {
		col.RIMs[id], _ = os.ReadFile(f)
	}
	v, _ := New(WithCollateral(col), WithTime(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)))
	nonce := func(s string) (n Nonce) { b, _ := hex.DecodeString(s); copy(n[:], b); return }
	cases := []struct {
		name  string
		item  Item
		nonce string
	}{
		{"unit hopper", txtItem(t, ArchHopper, "testdata/nvidia/unit-tests/hopperAttestationReport.txt", "testdata/nvidia/unit-tests/hopperCertChain.txt"), "5bb22e377702d4e1e8215a903ba094826b9ac7f731dee1fe8102958bf2840aca"},
		{"sample hopper", txtItem(t, ArchHopper, g+"hopperAttestationReport.txt", g+"hopperCertChain.txt"), "27a328247bf7935c993341cf587be6f05986ccce4fe7ba2c54100bd616a58f66"},
		{"expired", txtItem(t, ArchHopper, g+"hopperAttestationReportExpired.txt", g+"hopperCertChainExpired.txt"), "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"},
		{"invalidsig", txtItem(t, ArchHopper, g+"hopperAttestationReportInvalidSignature.txt", g+"hopperCertChainExpired.txt"), "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"},
		{"blackwell", txtItem(t, ArchBlackwell, g+"blackwellAttestationReport.txt", g+"blackwellCertChain.txt"), "931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb"},
	}
	for _, c := range cases {
		r := v.Verify(t.Context(), []Claim{{Item: c.item, Nonce: nonce(c.nonce), Label: c.name}})
		b, _ := json.MarshalIndent(r.GPUs[0], "", " ")
		t.Logf("%s", b)
	}
}
