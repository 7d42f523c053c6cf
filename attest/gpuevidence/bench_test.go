package gpuevidence_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/attest/gpuevidence"
	"github.com/gpuattest/gpuattest/attest/gpuevidence/gpuevidencetest"
)

// BenchmarkVerifyFleet verifies the GPU evidence of a fleet of 64 nodes
// with 8 GPUs each (issue 33's goal: within 2 s): 512 simulated GPUs,
// each with its own device key and chain (as real GPUs have), each
// report over its own fleet nonce, and the driver and VBIOS RIMs the
// GPUs share, checked by a fresh Verifier each time (RIMs included).
// It reports seconds per fleet (s/fleet) and per GPU.
func BenchmarkVerifyFleet(b *testing.B) {
	const nodes, perNode = 64, 8
	ca, err := gpuevidencetest.NewCA(t0)
	if err != nil {
		b.Fatal(err)
	}
	dispatch := "sha256:" + fmt.Sprintf("%064x", 1)
	var claims []gpuevidence.Claim
	var rims map[string][]byte
	for node := range nodes {
		for i := range perNode {
			g, err := ca.NewGPU(gpuevidencetest.GPUOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if rims == nil {
				if rims, err = ca.RIMs(g, ca.RIMSigner); err != nil {
					b.Fatal(err)
				}
			}
			job, uuid := fmt.Sprintf("node-%02d", node), fmt.Sprintf("GPU-%02d-%d", node, i)
			n := gpuevidence.FleetNonce(dispatch, job, uuid)
			it, err := g.Evidence(n)
			if err != nil {
				b.Fatal(err)
			}
			claims = append(claims, gpuevidence.Claim{Item: it, Nonce: n, Label: job + " " + uuid})
		}
	}
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range b.N {
		v, err := gpuevidence.New(gpuevidence.WithDeviceRoot(ca.DeviceRoot.Cert, "test"), gpuevidence.WithRIMRoot(ca.RIMRoot.Cert, "test"),
			gpuevidence.WithCollateral(&gpuevidence.Collateral{RIMs: rims}), gpuevidence.WithTime(at))
		if err != nil {
			b.Fatal(err)
		}
		rep := v.Verify(b.Context(), claims)
		if rep.Count(gpuevidence.StatusMatched) != len(claims) {
			b.Fatalf("%s: %v", rep.Summary(), rep.Err())
		}
	}
	per := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(per, "s/fleet")
	b.ReportMetric(per/float64(len(claims))*1e3, "ms/GPU")
	// CPU time shows what wall time hides on a shared machine: divided
	// by the cores, it is the wall time of an idle one.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/fleet")
}
