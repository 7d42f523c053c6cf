package gpuevidence

import (
	"os"
	"testing"
	"time"
)

func TestScratch(t *testing.T) {
	for _, f := range []string{"testdata/nvidia/serialized_test_evidence/multi_gpu_hopper.json", "testdata/nvidia/serialized_test_evidence/hopper_evidence.json"} {
		b, _ := os.ReadFile(f)
		items, err := ParseFile(f, b)
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range items {
			d, err := it.decode()
			if err != nil {
				t.Fatal(i, err)
			}
			chain, err := parseChain(d.chain)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(i, chain[0].Subject, len(chain))
			if _, err := verifyChain(chain, NVIDIADeviceRoot(), time.Now()); err != nil {
				t.Error(err)
			}
			if err := verifyRawP384(chain[0], d.report.Signed, d.report.Response.Signature); err != nil {
				t.Error(err)
			}
			fw, err := leafFWID(chain[0], it.Arch)
			o, _ := readGPUOpaque(d.report.Response.Opaque)
			t.Logf("fwid %x %v report %x", fw, err, o[OpaqueFWID])
			v, _ := o.vbiosVersion()
			t.Log(v)
		}
	}
}
