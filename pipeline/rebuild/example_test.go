package rebuild_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/pipeline/rebuild"
)

// A rebuild starts from bundles verified with the release key; the
// provenance among them says what to rebuild from which commit.
func ExampleRun() {
	ctx := context.Background()
	pub, err := sign.LoadPublicKey("release.pub")
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := verify.New(verify.WithKey(pub, "release.pub"), verify.WithPredicateType(attest.ProvenancePredicateType))
	if err != nil {
		fmt.Println(err)
		return
	}
	entries, err := v.ReadBundles(ctx, "attestations.intoto.jsonl")
	if err != nil {
		fmt.Println(err)
		return
	}
	rep := v.Verify(ctx, entries, nil)
	if !rep.Verified {
		fmt.Println("not verified:", rep.Failure)
		return
	}
	for _, b := range rep.Bundles {
		st := b.Statement()
		if st == nil || st.PredicateType != attest.ProvenancePredicateType {
			continue
		}
		res, err := rebuild.Run(ctx, st, "./kernels-checkout")
		switch {
		case errors.Is(err, rebuild.ErrSourceMismatch):
			fmt.Println("refused:", err)
		case err != nil:
			fmt.Println(err)
		default:
			for _, a := range res.Artifacts {
				fmt.Println(a.Name, a.Match)
			}
		}
		return
	}
}
