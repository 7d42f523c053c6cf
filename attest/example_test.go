package attest_test

import (
	"encoding/json"
	"fmt"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/attest"
)

// A run with a failed step yields a statement whose result is "failed"
// and that names the step: never a passing claim.
func ExampleValidationStatement() {
	hw := &hardware.Record{Simulated: true, GPUs: []hardware.GPU{}, Reason: "simulated, none attached"}
	if err := hw.Seal(); err != nil {
		panic(err)
	}
	st, err := attest.ValidationStatement(&attest.Run{
		PipelineDigest: "sha256:" + strings.Repeat("a", 64),
		Steps: []attest.StepVerdict{
			{ID: "build", Kind: "cuda-build", Verdict: "passed"},
			{ID: "test", Kind: "test", Verdict: "failed", Reason: "2 of 40 cases failed"},
		},
		Hardware:   hw,
		Artifacts:  []attest.FileDigest{{Path: "build/kernels.fatbin", SHA256: strings.Repeat("c", 64)}},
		StartedAt:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		FinishedAt: time.Date(2026, 1, 2, 3, 9, 5, 0, time.UTC),
		Version:    "v0.1.0",
	})
	if err != nil {
		panic(err)
	}
	var p attest.ValidationPredicate
	if err := json.Unmarshal(st.Predicate, &p); err != nil {
		panic(err)
	}
	fmt.Println(st.PredicateType)
	fmt.Println(st.Subject[0].Name, p.Result, p.FailedSteps, "simulated:", p.Simulated)
	// Output:
	// https://gpuattest.dev/gpu-validation/v2
	// build/kernels.fatbin failed [test] simulated: true
}
