package engine

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gpuattest/gpuattest/attest/problem"
	"github.com/gpuattest/gpuattest/internal/atomicfile"
	"github.com/gpuattest/gpuattest/internal/jsonstrict"
	"github.com/gpuattest/gpuattest/internal/limits"
	"github.com/gpuattest/gpuattest/pipeline/image"
	"github.com/gpuattest/gpuattest/pipeline/runlayout"
	"github.com/gpuattest/gpuattest/pipeline/runner"
	"github.com/gpuattest/gpuattest/pipeline/runtypes"
	"github.com/gpuattest/gpuattest/pipeline/source"
	"github.com/gpuattest/gpuattest/pipeline/step"
)

// RecordSchema identifies the run.json format.
const RecordSchema = "https://gpuattest.dev/run/v1"

// Record is run.json: the pipeline, the state of every step, and what each
// produced. It is rewritten atomically on every change, so it parses at any
// instant, also after a crash.
type Record struct {
	Schema     string         `json:"schema"`
	Pipeline   PipelineRef    `json:"pipeline"`
	LockDigest string         `json:"lock_digest,omitempty"`
	Version    string         `json:"gpuattest_version"`
	State      runtypes.State `json:"state"`
	Reason     string         `json:"reason,omitempty"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
	Hardware   *HardwareRef   `json:"hardware,omitempty"`
	Toolchain  any            `json:"toolchain,omitempty"`
	Source     *source.Info   `json:"source,omitempty"`
	Images     []image.Pinned `json:"images,omitempty"`
	Steps      []*StepRecord  `json:"steps"`
	Attempts   []Attempt      `json:"attempts"`
	// GPUEvidence is the GPUs' evidence over the run's nonce, as the
	// EvidenceCollector recorded it (attest.GPUEvidence).
	GPUEvidence json.RawMessage `json:"gpu_evidence,omitempty"`
}

// PipelineRef names the pipeline a run executed.
type PipelineRef struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

// HardwareRef points at hardware.json in the run directory.
type HardwareRef struct {
	Digest    string `json:"digest,omitempty"`
	Simulated bool   `json:"simulated"`
	File      string `json:"file"`
}

// Attempt is one invocation of run or resume on this run directory.
type Attempt struct {
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Resume     bool       `json:"resume"`
	// Reran lists steps a resume ran again, with why.
	Reran []string `json:"reran,omitempty"`
}

// StepRecord is one step's entry in run.json.
type StepRecord struct {
	ID         string         `json:"id"`
	Kind       string         `json:"kind"`
	State      runtypes.State `json:"state"`
	Reason     string         `json:"reason,omitempty"`
	StartedAt  *time.Time     `json:"started_at,omitempty"`
	FinishedAt *time.Time     `json:"finished_at,omitempty"`
	DurationMS int64          `json:"duration_ms,omitempty"`
	ExitCode   *int           `json:"exit_code,omitempty"`
	Runner     *runner.Info   `json:"runner,omitempty"`
	// CUDAVisibleDevices is CUDA_VISIBLE_DEVICES in a gpu: true step's
	// environment, when set: which of the hardware record's GPUs it saw.
	CUDAVisibleDevices string      `json:"cuda_visible_devices,omitempty"`
	Cache              string      `json:"cache,omitempty"` // hit, miss or off
	CacheKey           string      `json:"cache_key,omitempty"`
	Inputs             []step.File `json:"inputs,omitempty"`
	Outputs            []step.File `json:"outputs,omitempty"`
	Artifacts          []step.File `json:"artifacts,omitempty"`
	Results            []step.File `json:"results,omitempty"`
	// Reads are the files the step's tools reported reading (nvcc's
	// dependency output), with their digests: what its cache entry is
	// checked against, and what the provenance lists as resolved
	// dependencies.
	Reads []step.Read `json:"reads,omitempty"`
	Notes []string    `json:"notes,omitempty"`
	// Warnings are what the step's executor wants a reader not to miss
	// although the step passed (an AMBIGUOUS gate verdict under
	// gate.onAmbiguous: warn): the run then passes with warnings.
	Warnings []string `json:"warnings,omitempty"`
	// Details are the facts the step's executor reported, in its kind's
	// type (cuda.BuildDetails, suite.TestDetails, ...); pipeline/rundir
	// decodes them by kind.
	Details json.RawMessage `json:"details,omitempty"`
	// Preflight is the GPU preflight report of a gpu: true step.
	Preflight json.RawMessage `json:"preflight,omitempty"`
	// Telemetry is the GPU telemetry summary of a gpu: true step.
	Telemetry json.RawMessage `json:"telemetry,omitempty"`
	Runs      int             `json:"runs"`
}

// ReadRecord reads run.json from a run directory.
func ReadRecord(dir string) (*Record, error) {
	data, err := limits.ReadFile(runlayout.Record(dir), limits.RecordBytes, "run record")
	if err != nil {
		return nil, fmt.Errorf("reading run record: %w", err)
	}
	var r Record
	if probs := jsonstrict.Read(runlayout.Record(dir), data, maxRecordDepth, &r); len(probs) > 0 {
		probs[len(probs)-1].Hint = "run.json is the engine's own record; one that does not read as written was not written by it"
		return nil, fmt.Errorf("invalid run record: %w", probs.Err())
	}
	return &r, nil
}

// Warnings returns the warnings of every step, each prefixed with its
// step's id: a passed run with any passed with warnings.
func (r *Record) Warnings() []string {
	var out []string
	for _, s := range r.Steps {
		for _, w := range s.Warnings {
			out = append(out, s.ID+": "+w)
		}
	}
	return out
}

// maxRecordDepth bounds the nesting of run.json; a step's details,
// preflight and telemetry are nested documents of their own.
const maxRecordDepth = 64

// Validate reports a run record of another format (its schema).
func (r *Record) Validate() problem.List {
	if r.Schema != RecordSchema {
		return problem.List{{Path: "schema", Message: fmt.Sprintf("%q: expected %s", r.Schema, RecordSchema)}}
	}
	return nil
}

// Step returns the record of step id, or nil.
func (r *Record) Step(id string) *StepRecord {
	for _, s := range r.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// recorder owns the record and writes it. Changes are made under mu; the
// writer goroutine coalesces them so steps never wait on fsync, and flush
// waits until what was changed so far is on disk.
type recorder struct {
	path string
	mu   sync.Mutex
	rec  *Record
	gen  uint64 // bumped on every change
	done uint64 // generation last written
	err  error
	cond *sync.Cond
	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup
}

func newRecorder(path string, rec *Record) *recorder {
	r := &recorder{path: path, rec: rec, kick: make(chan struct{}, 1), quit: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	r.wg.Add(1)
	go r.loop()
	return r
}

// update applies f to the record under the lock and schedules a write.
func (r *recorder) update(f func(*Record)) {
	r.mu.Lock()
	f(r.rec)
	r.gen++
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// minWriteInterval spaces run.json rewrites: each is atomic and synced,
// and a burst of step changes within it becomes one write. A crash loses at
// most this much state, which resume handles by running a step again.
const minWriteInterval = 25 * time.Millisecond

func (r *recorder) loop() {
	defer r.wg.Done()
	for {
		select {
		case <-r.kick:
		case <-r.quit:
			r.write(true)
			return
		}
		r.write(false)
		select {
		case <-time.After(minWriteInterval):
		case <-r.quit:
			r.write(true)
			return
		}
	}
}

// write writes the record if it changed; the final write also syncs the
// directory so the last rename survives a power loss.
func (r *recorder) write(final bool) {
	r.mu.Lock()
	gen := r.gen
	if gen == r.done && r.done != 0 && !final {
		r.mu.Unlock()
		return
	}
	data, err := json.MarshalIndent(r.rec, "", "  ")
	r.mu.Unlock()
	if err == nil {
		if final {
			err = atomicfile.Write(r.path, append(data, '\n'), 0o644)
		} else {
			err = atomicfile.WriteNoDirSync(r.path, append(data, '\n'), 0o644)
		}
	}
	r.mu.Lock()
	if err != nil && r.err == nil {
		r.err = err
	}
	if gen > r.done {
		r.done = gen
	}
	r.cond.Broadcast()
	r.mu.Unlock()
}

// flush waits until every change made so far is written.
func (r *recorder) flush() error {
	r.mu.Lock()
	want := r.gen
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.done < want && r.err == nil {
		r.cond.Wait()
	}
	return r.err
}

// close writes the final state and stops the writer.
func (r *recorder) close() error {
	close(r.quit)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
