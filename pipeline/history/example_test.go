package history_test

import (
	"context"
	"fmt"
	"os"

	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/attest/verify"
	"github.com/gpuattest/gpuattest/pipeline/history"
)

// Collect verifies every release of a repository with the verifier a
// consumer would use, and draws only those that verified.
func ExampleCollect() {
	ctx := context.Background()
	pub, err := sign.LoadPublicKey("release.pub")
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := verify.New(verify.WithKey(pub, "release.pub"))
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := history.Collect(ctx, "registry.example.com/team/kernels", v, history.WithSince("v1.4.0"), history.WithJobs(8))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range h.Excluded {
		fmt.Printf("left out %s: %s\n", e.Tag, e.Reason)
	}
	for _, s := range h.Series {
		for _, m := range s.Marks {
			fmt.Printf("%s: %+.1f %% from %s to %s\n", s.Key, m.Delta*100, m.FromManifest, m.ToManifest)
		}
	}
	_ = h.WriteHTML(os.Stdout)
}
