package verify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"strings"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
)

// Sign a statement with a key, then verify the bundle offline against the
// default policy (every step passed, not simulated, gpu steps on real GPUs
// with cuda, every pinned target covered): the criteria are known before
// any bundle is read.
func Example() {
	ctx := context.Background()
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	kp, _ := sign.NewKeypair(priv)
	digest := strings.Repeat("c", 64)
	hw := &hardware.Record{GPUs: []hardware.GPU{{Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-1", ComputeCapability: "9.0"}}}
	if err := hw.Seal(); err != nil {
		panic(err)
	}
	h100 := attest.Device{UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3", ComputeCapability: "9.0"}
	st, err := attest.ValidationStatement(&attest.Run{
		PipelineDigest: "sha256:" + strings.Repeat("a", 64),
		Build:          &attest.BuildFacts{Targets: []string{"sm_90"}},
		Steps: []attest.StepVerdict{{ID: "test", Kind: "test", Verdict: "passed",
			GPU: true, Backend: "cuda", Devices: []attest.Device{h100}}},
		Hardware:  hw,
		Artifacts: []attest.FileDigest{{Path: "kernels.fatbin", SHA256: digest}},
	})
	if err != nil {
		panic(err)
	}
	signer, _ := sign.NewKeySigner(kp)
	bundle, err := signer.Sign(ctx, st)
	if err != nil {
		panic(err)
	}

	v, err := verify.New(verify.WithKey(priv.Public(), "release.pub"))
	if err != nil {
		panic(err)
	}
	arts := []verify.Artifact{{Name: "kernels.fatbin", SHA256: digest}}
	for _, c := range v.Criteria(arts) {
		fmt.Println("criterion:", c.Check)
	}
	r := v.Verify(ctx, []verify.Entry{{Source: "bundle.json", Data: bundle}}, arts)
	fmt.Println(r.VerificationResult, r.Failure)
	// Output:
	// criterion: signature
	// criterion: tlog/timestamps
	// criterion: predicate type
	// criterion: subject
	// criterion: policy
	// criterion: policy
	// criterion: policy
	// criterion: policy
	// criterion: coverage
	// PASSED none
}
