package dispatch_test

import (
	"fmt"
	"testing"

	"github.com/gpuattest/gpuattest/attest/dispatch"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// BenchmarkVerify64 verifies a dispatch and 64 node bundles.
func BenchmarkVerify64(b *testing.B) {
	f := newFixture(b)
	f.d.Jobs = nil
	for i := range 64 {
		s, _, pem := newSigner(b)
		name := fmt.Sprintf("h100-%d", i)
		f.jobKeys[name] = s
		f.d.Jobs = append(f.d.Jobs, dispatch.Job{Name: name, Class: "h100", Index: i, Gres: "gpu:h100:1", GPUs: 1, GPUModel: "h100", ComputeCapability: "9.0", Targets: []string{"sm_90"}, Nonce: fmt.Sprint("n", i), PublicKey: pem})
	}
	f.d.Targets = []string{"sm_90"}
	f.resign(b)
	var nodes []verify.Entry
	for _, j := range f.d.Jobs {
		nodes = append(nodes, f.bundle(b, f.jobKeys[j.Name], f.node(j.Name), j.Name))
	}
	owner := []verify.Option{verify.WithKey(f.ownerPub, "release.pub")}
	b.ResetTimer()
	for b.Loop() {
		r, err := dispatch.Verify(b.Context(), f.entry, owner, nodes, dispatch.Options{})
		if err != nil || !r.Verified {
			b.Fatalf("%v %v", err, r.Problems)
		}
	}
}
