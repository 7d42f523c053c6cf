package gpuevidence

import (
	"context"
	"fmt"
)

// Where a GPU's evidence came from.
const (
	// SourceNVML: NVML's confidential-computing calls (Hopper and later
	// in CC or protected-PCIe mode).
	SourceNVML = "nvml"
	// SourceNVAttest: NVIDIA's nvattest command (Blackwell and later, any
	// mode).
	SourceNVAttest = "nvattest"
	// SourceSimulated: a simulated GPU (GPUATTEST_FAKE_GPU) signing with
	// a test PKI; it verifies only under that PKI's root.
	SourceSimulated = "simulated"
)

// Collected is what collection got from one GPU of a hardware record:
// its evidence, or the reason it has none (the GPU is then unattested).
type Collected struct {
	// Index is the GPU's NVML index.
	Index int `json:"index"`
	// UUID is the GPU's UUID ("GPU-...").
	UUID string `json:"uuid"`
	// Name is the product name.
	Name string `json:"name"`
	// Source is SourceNVML, SourceNVAttest or SourceSimulated; empty
	// when unattested.
	Source string `json:"source,omitempty"`
	// Evidence is the GPU's evidence in NVIDIA's serialized form; nil
	// when unattested.
	Evidence *Item `json:"evidence,omitempty"`
	// Reason says why the GPU is unattested ("NVIDIA A100-SXM4-80GB: no
	// device attestation (Ampere)", "NVIDIA H100 80GB HBM3 not in CC
	// mode", "nvattest not installed").
	Reason string `json:"reason,omitempty"`
}

// Items returns the evidence of the attested GPUs in NVIDIA's serialized
// form (the file NVIDIA's own tools read), in GPU order.
func Items(cs []Collected) []Item {
	var out []Item
	for _, c := range cs {
		if c.Evidence != nil {
			out = append(out, *c.Evidence)
		}
	}
	return out
}

// VerifyCollected verifies what collection got from each GPU, each
// against the nonce nonceFor recomputes for it (the verifier's own
// derivation: FleetNonce with the GPU's UUID, or RunNonce for all). A
// GPU without evidence is StatusUnattested with its reason; every GPU is
// labelled by its UUID.
func (v *Verifier) VerifyCollected(ctx context.Context, cs []Collected, nonceFor func(Collected) Nonce) *Report {
	var claims []Claim
	var at []int
	rep := &Report{At: v.o.at, DeviceRoot: v.o.deviceRootName, RIMRoot: v.o.rimRootName, GPUs: make([]GPU, len(cs))}
	for i, c := range cs {
		label := c.UUID
		if label == "" {
			label = fmt.Sprintf("GPU %d", c.Index)
		}
		if c.Evidence == nil {
			reason := c.Reason
			if reason == "" {
				reason = "no evidence and no reason recorded"
			}
			rep.GPUs[i] = GPU{Index: c.Index, Label: label, Status: StatusUnattested, Reason: reason}
			continue
		}
		claims = append(claims, Claim{Item: *c.Evidence, Nonce: nonceFor(c), Label: label})
		at = append(at, i)
	}
	sub := v.Verify(ctx, claims)
	for j, g := range sub.GPUs {
		g.Index = cs[at[j]].Index
		rep.GPUs[at[j]] = g
	}
	return rep
}
