// Package runfixture writes a small signed run directory for the tests
// and benchmark of publishing: a pipeline with one cuda-build step whose
// artifacts are files of the caller's choosing, a passed run.json with
// their run-directory copies, a hardware record with no GPU (not
// simulated: a made-up host), and the attestations pipeline/run.Attest
// signs. Nothing is built; the files are not CUDA binaries. Options add
// a test step, an exec step that failed, or a simulated GPU.
package runfixture

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/attest/sign"
	"github.com/gpuattest/gpuattest/pipeline"
	"github.com/gpuattest/gpuattest/pipeline/cuda"
	"github.com/gpuattest/gpuattest/pipeline/engine"
	"github.com/gpuattest/gpuattest/pipeline/run"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/step"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// File is one released artifact of the fixture run.
type File struct {
	// Name is its path relative to the step's work dir (build/k.fatbin).
	Name string
	// Data is its content; when nil, Size pseudo-random bytes (seeded by
	// Name) are written.
	Data []byte
	// Size is the size of generated content.
	Size int64
}

// pipelineYAML is the fixture's pipeline: one cuda-build step.
const pipelineYAML = `apiVersion: gpuattest.dev/v1
kind: Pipeline
name: fixture
targets: [sm_80, sm_90]
steps:
  - id: kernels
    kind: cuda-build
    sources: [k.cu]
`

// testStepYAML is the test step WithTestCases adds.
const testStepYAML = `  - id: validate
    kind: test
    needs: [kernels]
    run: [./suite]
    results: results.json
`

// execStepYAML is the exec step WithFailedExec adds.
const execStepYAML = `  - id: %s
    kind: exec
    needs: [kernels]
    run: [./check]
`

// Option changes the fixture run.
type Option func(*options)

type options struct {
	testCases  []string
	failedExec string
	simulated  bool
}

// WithFailedExec adds an exec step, id, that ran after the build and
// exited 1: the run failed.
func WithFailedExec(id string) Option {
	return func(o *options) { o.failedExec = id }
}

// WithSimulatedGPU makes the hardware record a simulated H100
// (GPUATTEST_FAKE_GPU), marked simulated.
func WithSimulatedGPU() Option {
	return func(o *options) { o.simulated = true }
}

// WithTestCases adds a test step, validate, whose results (the
// gpuattest format, backend cpu) hold these passed cases.
func WithTestCases(names ...string) Option {
	return func(o *options) { o.testCases = append(o.testCases, names...) }
}

// Write writes root/p.yaml and a passed run of it into dir whose step
// released files, and, when s is not nil, signs it with run.Attest. It
// returns the loaded pipeline.
func Write(ctx context.Context, root, dir string, files []File, s *sign.Signer, opts ...Option) (*pipeline.Pipeline, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	yml := pipelineYAML
	if len(o.testCases) > 0 {
		yml += testStepYAML
	}
	if o.failedExec != "" {
		yml += fmt.Sprintf(execStepYAML, o.failedExec)
	}
	for name, body := range map[string]string{"p.yaml": yml, "k.cu": "// fixture\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	p, err := pipeline.Load(filepath.Join(root, "p.yaml"), pipeline.WithRoot(root))
	if err != nil {
		return nil, err
	}
	rec, err := record(dir, p, files, o.simulated)
	if err != nil {
		return nil, err
	}
	if len(o.testCases) > 0 {
		sr, err := testStep(dir, rec.Steps[0], o.testCases)
		if err != nil {
			return nil, err
		}
		rec.Steps = append(rec.Steps, sr)
	}
	if o.failedExec != "" {
		exit1 := 1
		build := rec.Steps[0]
		rec.Steps = append(rec.Steps, &engine.StepRecord{ID: o.failedExec, Kind: pipeline.KindExec, State: runtypes.Failed, Reason: "exit status 1",
			StartedAt: build.StartedAt, FinishedAt: build.FinishedAt, ExitCode: &exit1, Cache: "off"})
		rec.State, rec.Reason = runtypes.Failed, "step "+o.failedExec+" failed"
	}
	if err := writeJSON(filepath.Join(dir, "run.json"), rec); err != nil {
		return nil, err
	}
	if s != nil {
		if _, err := run.Attest(ctx, s, p, dir); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// record writes the artifacts' copies and the hardware record and
// returns run.json.
func record(dir string, p *pipeline.Pipeline, files []File, simulated bool) (*engine.Record, error) {
	var arts []step.File
	det := &cuda.BuildDetails{Targets: []string{"sm_80", "sm_90"}, Output: "fatbin", PTX: true}
	for _, f := range files {
		dst := filepath.Join(dir, "steps", "kernels", "outputs", filepath.FromSlash(f.Name))
		sum, n, err := writeFile(dst, f)
		if err != nil {
			return nil, err
		}
		arts = append(arts, step.File{Path: f.Name, SHA256: sum, Size: n, Kind: "fatbin", Mode: 0o644})
		det.Artifacts = append(det.Artifacts, &runtypes.Inspection{Path: f.Name, SHA256: sum, Size: n, SASS: []string{"sm_80", "sm_90"}, PTX: []string{"compute_90"}})
	}
	hw := &hardware.Record{GPUs: []hardware.GPU{}, Reason: "fixture: no GPU",
		Host: hardware.Host{CPUModel: "fixture CPU", CPUCores: 2, MemoryBytes: 8 << 30, Kernel: "6.1.0", OS: "Debian GNU/Linux 12 (bookworm)"}}
	if simulated {
		hw.Simulated, hw.Reason, hw.DriverVersion = true, "", "550.54.15"
		hw.GPUs = []hardware.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-00000000-0000-0000-0000-000000000000", ComputeCapability: "9.0"}}
	}
	if err := hw.Seal(); err != nil {
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, "hardware.json"), hw); err != nil {
		return nil, err
	}
	details, err := json.Marshal(det)
	if err != nil {
		return nil, err
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t1, exit0 := t0.Add(time.Minute), 0
	sr := &engine.StepRecord{ID: "kernels", Kind: pipeline.KindCUDABuild, State: runtypes.Passed, StartedAt: &t0, FinishedAt: &t1,
		ExitCode: &exit0, Cache: "off", Outputs: arts, Artifacts: arts, Details: details}
	return &engine.Record{Schema: engine.RecordSchema, Pipeline: engine.PipelineRef{Name: p.Name, Path: p.Path, Digest: p.Digest},
		Version: "v0.0.0-fixture", State: runtypes.Passed, StartedAt: t0, FinishedAt: &t1,
		Hardware: &engine.HardwareRef{Digest: hw.Digest, Simulated: simulated, File: "hardware.json"}, Steps: []*engine.StepRecord{sr},
		Attempts: []engine.Attempt{{StartedAt: t0, FinishedAt: &t1}}}, nil
}

// testStep writes the test step's results copy and returns its record,
// timed like the build step before it.
func testStep(dir string, build *engine.StepRecord, cases []string) (*engine.StepRecord, error) {
	res := suite.Results{Schema: suite.ResultsSchemaID, Tool: "fixture-suite 1.0", Backend: "cpu"}
	for _, n := range cases {
		res.Cases = append(res.Cases, suite.Case{Name: n, Status: suite.StatusPassed})
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	sum, n, err := writeFile(filepath.Join(dir, "steps", "validate", "results.json"), File{Name: "results.json", Data: b})
	if err != nil {
		return nil, err
	}
	det := suite.TestDetails{Results: "results.json", Format: suite.FormatGpuattest, Tool: res.Tool, Backend: "cpu",
		Counts: suite.Counts{Total: len(cases), Passed: len(cases)}}
	details, err := json.Marshal(det)
	if err != nil {
		return nil, err
	}
	files := []step.File{{Path: "results.json", SHA256: sum, Size: n, Kind: "results"}}
	exit0 := 0
	return &engine.StepRecord{ID: "validate", Kind: pipeline.KindTest, State: runtypes.Passed, StartedAt: build.StartedAt, FinishedAt: build.FinishedAt,
		ExitCode: &exit0, Cache: "off", Results: files, Details: details}, nil
}

// writeFile writes f's content to dst and returns its sha256 and size.
func writeFile(dst string, f File) (string, int64, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", 0, err
	}
	out, err := os.Create(dst)
	if err != nil {
		return "", 0, err
	}
	defer out.Close()
	var r io.Reader
	if f.Data != nil {
		r = bytes.NewReader(f.Data)
	} else {
		seed := sha256.Sum256([]byte(f.Name))
		r = io.LimitReader(rand.NewChaCha8(seed), f.Size)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), r)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, out.Close()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
