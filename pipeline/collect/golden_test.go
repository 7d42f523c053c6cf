package collect_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuattest/gpuattest/attest"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/collect"
	"github.com/gpuattest/gpuattest/pipeline/gpu"
	"github.com/gpuattest/gpuattest/pipeline/run"
)

var (
	update  = flag.Bool("update", false, "rewrite the golden predicates and provenance from testdata/runs")
	capture = flag.Bool("capture", false, "run the pipelines again (real nvcc, CPU backend, simulated H100) and replace testdata/runs")
)

// goldenRun is a run directory checked in under testdata/runs/<name>:
// root/ holds the pipeline file as it was run, run/ the files of the run
// directory that collect reads.
type goldenRun struct {
	name     string
	pipeline string // relative to the root
	// make runs it again (with -capture): it returns the run directory
	// and the root the pipeline ran from.
	make func(t *testing.T) (runDir, root string)
}

var goldenRuns = []goldenRun{
	{name: "quickstart", pipeline: "pipelines/quickstart.yaml", make: repoRun("pipelines/quickstart.yaml")},
	{name: "ci", pipeline: "pipelines/ci.yaml", make: repoRun("pipelines/ci.yaml")},
	{name: "simulated-h100", pipeline: "p.yaml", make: simulatedRun},
}

// repoRun runs one of the repository's pipelines on this machine.
func repoRun(file string) func(t *testing.T) (string, string) {
	return func(t *testing.T) (string, string) {
		root, err := filepath.Abs("../..")
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.Load(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "run")
		res, err := run.Pipeline(t.Context(), p, run.WithOutDir(dir), run.WithoutCache(), run.WithVersion("v0.0.0-golden"))
		if err != nil || !res.Passed() {
			t.Fatalf("running %s: %v %+v", file, err, res)
		}
		return dir, root
	}
}

const simulatedPipeline = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: simulated
targets: [sm_90]
steps:
  - id: kernels
    kind: cuda-build
    sources: [k.cu]
  - id: smoke
    needs: [kernels]
    gpu: true
    run: echo smoke on $GPUATTEST_STEP_ID
`

// simulatedRun builds a kernel and runs a gpu: true step on a simulated
// H100 (go-nvml's mock server): preflight and telemetry are recorded,
// and everything derived says simulated.
func simulatedRun(t *testing.T) (string, string) {
	root := t.TempDir()
	for name, body := range map[string]string{"p.yaml": simulatedPipeline, "k.cu": "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := pipeline.Load(filepath.Join(root, "p.yaml"), pipeline.WithRoot(root))
	if err != nil {
		t.Fatal(err)
	}
	src, err := gpu.Simulate("h100")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	res, err := run.Pipeline(t.Context(), p, run.WithOutDir(dir), run.WithoutCache(), run.WithGPUSource(src), run.WithVersion("v0.0.0-golden"))
	if err != nil || !res.Passed() {
		t.Fatalf("simulated run: %v %+v", err, res)
	}
	return dir, root
}

// TestGoldenStatements builds the validation predicate and the provenance
// of each checked-in run and compares them with the golden files
// (-update rewrites them; -capture runs the pipelines again first). No
// statement may hold a local path.
func TestGoldenStatements(t *testing.T) {
	for _, g := range goldenRuns {
		t.Run(g.name, func(t *testing.T) {
			base := filepath.Join("testdata", "runs", g.name)
			if *capture {
				runDir, root := g.make(t)
				saveRun(t, base, runDir, filepath.Join(root, g.pipeline), g.pipeline)
			}
			root, err := filepath.Abs(filepath.Join(base, "root"))
			if err != nil {
				t.Fatal(err)
			}
			p, err := pipeline.Load(filepath.Join(root, g.pipeline), pipeline.WithRoot(root))
			if err != nil {
				t.Fatal(err)
			}
			r, err := collect.FromRunDir(filepath.Join(base, "run"), p)
			if err != nil {
				t.Fatal(err)
			}
			val, err := attest.ValidationStatement(r)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join(base, "predicate.golden.json"), val.Predicate)
			tests, err := attest.TestResultStatements(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(tests) > 0 {
				var preds []json.RawMessage
				for _, st := range tests {
					if err := checkTestResultSpec(st); err != nil {
						t.Error(err)
					}
					if diff := cmp.Diff(val.Subject, st.Subject); diff != "" {
						t.Errorf("test-result subjects differ from the validation statement's (-want +got):\n%s", diff)
					}
					preds = append(preds, st.Predicate)
				}
				all, err := json.Marshal(preds)
				if err != nil {
					t.Fatal(err)
				}
				checkGolden(t, filepath.Join(base, "testresult.golden.json"), all)
			}
			if r.Build != nil {
				prov, err := attest.ProvenanceStatement(r)
				if err != nil {
					t.Fatal(err)
				}
				checkGolden(t, filepath.Join(base, "provenance.golden.json"), prov.Predicate)
			}
		})
	}
}

// localPath matches what a local path looks like in a statement.
var localPath = regexp.MustCompile(`"(/tmp|/home|/root|/work|/var)/`)

func checkGolden(t *testing.T, path string, got json.RawMessage) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	if m := localPath.Find(buf.Bytes()); m != nil {
		t.Errorf("%s: a local path in a signed statement: %s", path, m)
	}
	if *update || *capture {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v\nhint: go test ./pipeline/collect -run TestGoldenStatements -update", err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("%s (-want +got):\n%s\nhint: if the change is intended, go test ./pipeline/collect -run TestGoldenStatements -update", path, diff)
	}
}

// saveRun replaces base with the pipeline file and the parts of the run
// directory collect reads: run.json, hardware.json and everything under
// steps/ but the copied outputs (collect reads their digests from
// run.json).
func saveRun(t *testing.T, base, runDir, pipelineFile, rel string) {
	t.Helper()
	if err := os.RemoveAll(base); err != nil {
		t.Fatal(err)
	}
	copyFile(t, pipelineFile, filepath.Join(base, "root", rel))
	err := filepath.WalkDir(runDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(runDir, p)
		if d.IsDir() {
			if strings.HasSuffix(r, string(filepath.Separator)+"outputs") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		copyFile(t, p, filepath.Join(base, "run", r))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
