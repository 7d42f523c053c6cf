package cuda_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuattest/gpuattest/internal/testenv"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// TestQuickstartPipeline runs pipelines/quickstart.yaml end to end through
// the engine with the cuda-build executor and the suite's test executor:
// real nvcc builds with the reproducibility check, the harness built with
// g++, the validation suite on whatever backend this machine has, in a
// copy of the repository layout (pipelines/, kernels/). A second run
// restores the build from the cache.
func TestQuickstartPipeline(t *testing.T) {
	for _, tool := range []string{"nvcc", "cuobjdump", "g++"} {
		testenv.RequireTool(t, tool)
	}
	root := t.TempDir()
	repo := filepath.Join("..", "..")
	copyDir(t, filepath.Join(repo, "kernels"), filepath.Join(root, "kernels"))
	if err := os.MkdirAll(filepath.Join(root, "pipelines"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(repo, "pipelines", "quickstart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pfile := filepath.Join(root, "pipelines", "quickstart.yaml")
	if err := os.WriteFile(pfile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// The copy is in no git work tree: name its root, which workdir: ..
	// reaches.
	p, err := pipeline.Load(pfile, pipeline.WithRoot(root))
	if err != nil {
		t.Fatalf("loading quickstart.yaml: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	opts := func(out string) []engine.Option {
		return []engine.Option{
			engine.WithOutDir(filepath.Join(root, out)),
			engine.WithCacheDir(filepath.Join(root, "cache")),
			engine.WithJobs(2),
			engine.WithExecutor(pipeline.KindCUDABuild, &cuda.Build{}),
			engine.WithExecutor(pipeline.KindTest, suite.Test{}),
			engine.WithToolchain(func(ctx context.Context) any {
				tc, err := cuda.Fingerprint(ctx, &runner.Host{})
				if err != nil {
					return map[string]string{"error": err.Error()}
				}
				return tc
			}),
		}
	}
	res, err := engine.Run(ctx, p, opts("run1")...)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed() {
		for _, s := range res.Record.Steps {
			log, _ := os.ReadFile(filepath.Join(res.Dir, "steps", s.ID, "stderr.log"))
			t.Errorf("step %s: %s %s\n%s", s.ID, s.State, s.Reason, log)
		}
		t.FailNow()
	}
	steps := map[string]*engine.StepRecord{}
	for _, s := range res.Record.Steps {
		steps[s.ID] = s
	}
	var det cuda.BuildDetails
	if err := json.Unmarshal(steps["kernels"].Details, &det); err != nil {
		t.Fatalf("kernels details: %v\n%s", err, steps["kernels"].Details)
	}
	if len(det.Artifacts) != 4 || det.Reproducibility == nil || !det.Reproducibility.Reproducible {
		t.Errorf("kernels details: %d artifacts, reproducibility %+v", len(det.Artifacts), det.Reproducibility)
	}
	for _, a := range det.Artifacts {
		if strings.Join(a.SASS, " ") != "sm_80 sm_90" || strings.Join(a.PTX, " ") != "compute_90" {
			t.Errorf("%s: SASS %v PTX %v", a.Path, a.SASS, a.PTX)
		}
	}
	if len(steps["kernels"].Artifacts) != 4 {
		t.Errorf("kernels artifacts in run.json: %+v", steps["kernels"].Artifacts)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "steps", "kernels", "repro.json")); err != nil {
		t.Errorf("repro.json: %v", err)
	}
	tc, _ := json.Marshal(res.Record.Toolchain)
	if !strings.Contains(string(tc), `"nvcc_sha256"`) {
		t.Errorf("toolchain not recorded: %s", tc)
	}
	results, err := suite.ReadResults(filepath.Join(root, "kernels", "build", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(results.Cases) != 4 || (results.Backend == "cpu") != (results.Device == "") {
		t.Errorf("results: backend %q device %q, %d cases", results.Backend, results.Device, len(results.Cases))
	}
	t.Logf("validate ran on backend %s; kernels step %d ms", results.Backend, steps["kernels"].DurationMS)

	res2, err := engine.Run(ctx, p, opts("run2")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res2.Record.Steps {
		if s.ID == "kernels" && (s.State != runtypes.Passed || s.Cache != "hit") {
			t.Errorf("second run: kernels %s, cache %q; want passed from the cache", s.State, s.Cache)
		}
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			if info.Name() == "build" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(filepath.Join(dst, rel))
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}
