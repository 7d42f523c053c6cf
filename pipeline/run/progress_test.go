package run_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
)

// A gpu: true step says "preflight" while preflight runs and "running"
// after it: a step that reports nothing until it ends (a sustained
// burn-in is one invocation) no longer shows "preflight" for its whole
// run. SIMULATED: the GPU is go-nvml's mock.
func TestProgressPhaseAfterPreflight(t *testing.T) {
	t.Parallel()
	src, err := gpu.Simulate("h100")
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Load(write(t, `steps:
  - {id: burn, run: "sleep 0.3", gpu: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var phases []string
	res, err := run.Pipeline(t.Context(), p, run.WithOutDir(filepath.Join(t.TempDir(), "r")), run.WithoutCache(), run.WithGPUSource(src),
		run.WithBaseEnv([]string{"PATH=" + os.Getenv("PATH")}), run.WithProgress(func(ev runtypes.Event) {
			if ev.Step == "burn" && ev.Progress != nil {
				mu.Lock()
				phases = append(phases, ev.Progress.Phase)
				mu.Unlock()
			}
		}))
	if err != nil || !res.Passed() {
		t.Fatalf("run: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(phases) != 2 || phases[0] != "preflight" || phases[1] != "running" {
		t.Errorf("phases %q; want preflight, then running", phases)
	}
}
