package suite

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/attest/hardware"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/digest"
	"github.com/gpuattest/gpuattest/internal/limits"
)

// Baseline is a baseline file: the samples of a benchmark step with the
// hardware they were taken on, which later runs gate against.
type Baseline struct {
	// Schema is BaselineSchemaID.
	Schema string `json:"schema"`
	// Created is when the baseline was saved.
	Created time.Time `json:"created"`
	// Source says which run and step the samples come from.
	Source BaselineSource `json:"source"`
	// Hardware is where the samples were taken.
	Hardware Hardware `json:"hardware"`
	// Cases hold the samples per case.
	Cases []SampleCase `json:"cases"`
}

// BaselineSource names the run a baseline was saved from.
type BaselineSource struct {
	// RunDir is the run directory as given.
	RunDir string `json:"run_dir"`
	// Step is the benchmark step's id.
	Step string `json:"step"`
	// BenchmarkSHA256 is the digest of the benchmark.json read.
	BenchmarkSHA256 string `json:"benchmark_sha256"`
}

// SaveBaseline builds a baseline from a run directory's benchmark step:
// RUNDIR/steps/<stepID>/benchmark.json, with the hardware digest checked
// against RUNDIR/hardware.json when that exists. An empty stepID picks the
// run's only benchmark step.
func SaveBaseline(runDir, stepID string) (*Baseline, error) {
	if st, err := os.Stat(runDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("run directory %s does not exist\nhint: pass the directory gpuattest run wrote (it holds run.json and steps/)", runDir)
	}
	if stepID == "" {
		m, _ := filepath.Glob(runlayout.StepFile(runDir, "*", runlayout.BenchmarkFile))
		switch len(m) {
		case 0:
			return nil, fmt.Errorf("%s: no benchmark step (no steps/*/benchmark.json)\nhint: only a benchmark step's samples make a baseline", runDir)
		case 1:
			stepID = filepath.Base(filepath.Dir(m[0]))
		default:
			var ids []string
			for _, p := range m {
				ids = append(ids, filepath.Base(filepath.Dir(p)))
			}
			sort.Strings(ids)
			return nil, fmt.Errorf("%s has several benchmark steps (%s)\nhint: choose one with --step", runDir, strings.Join(ids, ", "))
		}
	}
	path := runlayout.StepFile(runDir, stepID, runlayout.BenchmarkFile)
	set, err := LoadSampleSet(path, "benchmark")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("step %s of %s has no benchmark.json\nhint: is %s a benchmark step, and did it finish?", stepID, runDir, stepID)
		}
		return nil, err
	}
	if set.Kind != "benchmark" {
		return nil, fmt.Errorf("%s is a %s file, expected a benchmark.json", path, set.Kind)
	}
	if len(set.Cases) == 0 {
		return nil, fmt.Errorf("%s holds no case with samples: nothing to save", path)
	}
	sum, _, err := digest.File(path)
	if err != nil {
		return nil, err
	}
	hw := set.Hardware
	raw, err := limits.ReadFile(runlayout.Hardware(runDir), limits.RecordBytes, "hardware record")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err == nil {
		full, err := hardware.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", runlayout.Hardware(runDir), err)
		}
		rec := HardwareFromRecord(full)
		if hw.Digest == "" {
			hw.Digest, hw.Simulated = rec.Digest, rec.Simulated
			if hw.GPUModel == "" {
				hw.GPUModel = rec.GPUModel
			}
		} else if rec.Digest != "" && rec.Digest != hw.Digest {
			return nil, fmt.Errorf("%s: hardware digest %s differs from the run's hardware.json %s", path, hw.Digest, rec.Digest)
		}
	}
	return &Baseline{
		Schema:   BaselineSchemaID,
		Created:  time.Now().UTC().Truncate(time.Second),
		Source:   BaselineSource{RunDir: runDir, Step: stepID, BenchmarkSHA256: sum},
		Hardware: hw,
		Cases:    set.Cases,
	}, nil
}

// Write writes b to path atomically as indented JSON.
func (b *Baseline) Write(path string) error {
	return atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(b)
	})
}
