package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/suite"
)

// AttestationsFile is the name of the signed attestations in a run
// directory: one Sigstore bundle per line.
const AttestationsFile = runlayout.AttestationsFile

// StepDir returns the directory of step id in the run directory.
func (r *Run) StepDir(id string) string {
	return runlayout.StepDir(r.Dir, id)
}

// stepFile is the path of name in step id's directory; an id that is not
// one plain path element (a run.json edited to climb out) is an error.
func (r *Run) stepFile(id, name string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/\\\x00") {
		return "", fmt.Errorf("step id %q is not a directory name in %s", id, r.Dir)
	}
	return filepath.Join(r.StepDir(id), name), nil
}

// BenchmarkSamples reads the benchmark.json of benchmark step id: its
// details with every case's raw samples (and the same-run reference's,
// under Reference.Cases). It returns nil and no error when the step wrote
// none (it failed before its samples were merged).
func (r *Run) BenchmarkSamples(id string) (*suite.BenchmarkDetails, error) {
	path, err := r.stepFile(id, runlayout.BenchmarkFile)
	if err != nil {
		return nil, err
	}
	b, err := limits.ReadFile(path, limits.RecordBytes, "benchmark file")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var d suite.BenchmarkDetails
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if d.Schema != suite.BenchmarkSchemaID {
		return nil, fmt.Errorf("%s: schema %q: expected %s", path, d.Schema, suite.BenchmarkSchemaID)
	}
	return &d, nil
}

// Telemetry reads the telemetry.jsonl of step id (a gpu: true step):
// every sample and event line in file order. It returns nil and no error
// when the step has none.
func (r *Run) Telemetry(id string) ([]runtypes.TelemetryLine, error) {
	path, err := r.stepFile(id, runlayout.TelemetryFile)
	if err != nil {
		return nil, err
	}
	b, err := limits.ReadFile(path, limits.RecordBytes, "telemetry file")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var lines []runtypes.TelemetryLine
	raw := bytes.Split(b, []byte("\n"))
	for i, line := range raw {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var l runtypes.TelemetryLine
		if err := json.Unmarshal(line, &l); err != nil {
			// The last line of a step killed mid-write may be cut short.
			if len(bytes.TrimSpace(bytes.Join(raw[i+1:], nil))) == 0 {
				break
			}
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// Attestations reads the run's signed attestations (AttestationsFile) as
// written, unverified; nil and no error when the run was not signed.
func (r *Run) Attestations() ([]byte, error) {
	path := runlayout.Attestations(r.Dir)
	b, err := limits.ReadFile(path, limits.RecordBytes, "attestations file")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return b, nil
}
